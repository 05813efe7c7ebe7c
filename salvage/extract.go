package salvage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Extract reads the MariaDB binary logs files (paths, oldest first) and
// writes to w one valid binary log: the magic bytes, the first file's
// Format_description event marked closed, then every event group whose GTID
// want selects, in order. An event group is a GTID event and the events
// after it up to the next GTID event or the next event that belongs to no
// transaction (Stop, Rotate, Format_description, Binlog_checkpoint,
// Gtid_list). Each event's log_pos is rewritten to its end in the new log
// and, if the new log has checksums, its CRC32 recomputed, so mariadb-binlog
// reads the result like any closed log.
//
// It returns the GTIDs of the groups it copied, in order. A corrupt,
// truncated or encrypted file is a [*LogError]; w then holds a partial log
// the caller must discard.
func Extract(files []string, want Want, w io.Writer) ([]gtid.MariaDBGTID, error) {
	if want == nil {
		return nil, errors.New("salvage: no Want given; select the transactions with NotIn(the leader's @@gtid_binlog_state)")
	}
	if len(files) == 0 {
		return nil, errors.New("salvage: no binary log files given; list them with mysqlctl.Instance.BinaryLogFiles")
	}
	out := &logWriter{w: bufio.NewWriterSize(w, 1<<16)}
	var copied []gtid.MariaDBGTID
	for _, path := range files {
		var err error
		if copied, err = extractFile(path, want, out, copied); err != nil {
			return nil, err
		}
	}
	if err := out.w.Flush(); err != nil {
		return nil, fmt.Errorf("writing the extracted binary log: %w", err)
	}
	return copied, nil
}

// extractFile copies path's selected groups to out and returns copied with
// their GTIDs appended.
func extractFile(path string, want Want, out *logWriter, copied []gtid.MariaDBGTID) ([]gtid.MariaDBGTID, error) {
	l, err := openLog(path)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if out.fde == nil {
		if err := out.start(l.fde); err != nil {
			return nil, err
		}
	}
	selected := false
	for {
		ev, err := l.next()
		if err == io.EOF {
			return copied, nil
		}
		if err != nil {
			return nil, err
		}
		switch ev.typ {
		case typeGTID:
			g, err := parseGTID(ev)
			if err != nil {
				return nil, l.fail(ev.offset, "%v", err)
			}
			if selected = want(g); selected {
				copied = append(copied, g)
			}
		case typeStop, typeRotate, typeFormatDescription, typeBinlogCheckpoint, typeGTIDList:
			selected = false
			continue
		}
		if !selected {
			continue
		}
		if err := out.checkLayout(l, ev); err != nil {
			return nil, err
		}
		if err := out.put(ev.data, out.fde.checksum == checksumCRC32); err != nil {
			return nil, err
		}
	}
}

// parseGTID reads a MariaDB GTID event: seq_no u64 and domain_id u32 start
// its body; the server_id is the header's.
func parseGTID(ev event) (gtid.MariaDBGTID, error) {
	body := ev.data[headerLen:]
	if len(body) < gtidBodyMin {
		return gtid.MariaDBGTID{}, fmt.Errorf("GTID event body of %d bytes is too short (want at least %d)", len(body), gtidBodyMin)
	}
	return gtid.MariaDBGTID{
		Domain:   binary.LittleEndian.Uint32(body[8:]),
		ServerID: ev.serverID,
		Seq:      binary.LittleEndian.Uint64(body),
	}, nil
}

// logWriter writes the new binary log, tracking its length for log_pos.
type logWriter struct {
	w   *bufio.Writer
	fde *formatDescription // the new log's, from the first file
	off int64
}

// start writes the magic bytes and fde, marked closed: mariadb-binlog warns
// about a log still in use, and this one is complete.
func (o *logWriter) start(fde formatDescription) error {
	o.fde = &fde
	if _, err := o.w.WriteString(magic); err != nil {
		return fmt.Errorf("writing the extracted binary log: %w", err)
	}
	o.off = int64(len(magic))
	raw := append([]byte(nil), fde.raw...)
	flags := binary.LittleEndian.Uint16(raw[offFlags:]) &^ flagInUse
	binary.LittleEndian.PutUint16(raw[offFlags:], flags)
	// The event always has a checksum field; with checksums off its value is
	// not checked, and a correct CRC32 there is what the server writes too.
	return o.put(raw[:len(raw)-checksumLen], true)
}

// checkLayout refuses to copy an event from a log whose Format_description
// declares a different post-header length for its type than the new log's
// does: mariadb-binlog would decode it wrongly. That happens only when the
// logs span a server upgrade that changed the event's layout.
func (o *logWriter) checkLayout(l *logReader, ev event) error {
	want, known := o.fde.postHeaderLen(ev.typ)
	have, declared := l.fde.postHeaderLen(ev.typ)
	if known == declared && want == have {
		return nil
	}
	return fmt.Errorf("salvage: %s at offset %d: event type %d has a %d-byte post-header in this log (server %s) "+
		"but %d bytes in the first log given (server %s); extract the logs of each server version separately",
		l.path, ev.offset, ev.typ, have, l.fde.serverVersion, want, o.fde.serverVersion)
}

// put writes one event, data being its header and body without checksum;
// it sets the header's event_size and log_pos for the new log and appends a
// CRC32 when crc is set. data is modified.
func (o *logWriter) put(data []byte, crc bool) error {
	size := int64(len(data))
	if crc {
		size += checksumLen
	}
	end := o.off + size
	if end > math.MaxUint32 {
		return errors.New("salvage: the selected transactions exceed 4 GiB, the most one binary log can hold; " +
			"save them by hand with mariadb-binlog")
	}
	binary.LittleEndian.PutUint32(data[offSize:], uint32(size))
	binary.LittleEndian.PutUint32(data[offLogPos:], uint32(end))
	if _, err := o.w.Write(data); err != nil {
		return fmt.Errorf("writing the extracted binary log: %w", err)
	}
	if crc {
		var sum [checksumLen]byte
		binary.LittleEndian.PutUint32(sum[:], crc32.ChecksumIEEE(data))
		if _, err := o.w.Write(sum[:]); err != nil {
			return fmt.Errorf("writing the extracted binary log: %w", err)
		}
	}
	o.off = end
	return nil
}
