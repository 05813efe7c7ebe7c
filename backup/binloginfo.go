package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BinlogInfo is the donor's binary log position at the backup's
// consistent point, as mariabackup records it.
type BinlogInfo struct {
	File string
	Pos  uint64
	// GTID is the donor's gtid_binlog_pos (MariaDB form "d-s-n,...") at that
	// point; "" when the donor wrote no GTID yet.
	GTID string
}

// binlogInfoFiles are the names mariabackup has used for the record, newest
// first (11.x renamed it).
var binlogInfoFiles = []string{"mariadb_backup_binlog_info", "xtrabackup_binlog_info"}

// ReadBinlogInfo reads the binlog record of a backup extracted in dir.
func ReadBinlogInfo(dir string) (BinlogInfo, error) {
	for _, name := range binlogInfoFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return BinlogInfo{}, err
		}
		return ParseBinlogInfo(string(b))
	}
	return BinlogInfo{}, fmt.Errorf("reading binlog position of backup in %s: none of %v (was binary logging on at the donor?)", dir, binlogInfoFiles)
}

// ParseBinlogInfo parses "file<TAB>pos[<TAB>gtid]".
func ParseBinlogInfo(s string) (BinlogInfo, error) {
	f := strings.Fields(strings.TrimSpace(s))
	if len(f) < 2 || len(f) > 3 {
		return BinlogInfo{}, fmt.Errorf("binlog info %q: want file, position and optional GTID", s)
	}
	pos, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return BinlogInfo{}, fmt.Errorf("binlog info %q: position: %w", s, err)
	}
	bi := BinlogInfo{File: f[0], Pos: pos}
	if len(f) == 3 {
		bi.GTID = f[2]
		for _, g := range strings.Split(bi.GTID, ",") {
			if p := strings.Split(g, "-"); len(p) != 3 || !allDigits(p...) {
				return BinlogInfo{}, fmt.Errorf("binlog info %q: GTID %q is not domain-server-sequence", s, g)
			}
		}
	}
	return bi, nil
}

func allDigits(ss ...string) bool {
	for _, s := range ss {
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return false
		}
	}
	return true
}
