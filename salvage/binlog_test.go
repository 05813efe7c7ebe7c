package salvage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Event types the synthetic logs use besides those binlog.go names.
const (
	typeQuery        = 2
	typeXID          = 16
	typeTableMap     = 19
	typeWriteRows    = 23
	typeAnnotateRows = 160
)

// synthLog builds a small binary log in memory the way MariaDB 10.11 lays
// one out: magic, Format_description, Gtid_list, Binlog_checkpoint, then
// whatever the test adds.
type synthLog struct {
	buf  bytes.Buffer
	crc  bool
	phdr []byte // post-header lengths
}

// postHeaders10_11 are the post-header lengths a MariaDB 10.11.19 server
// declares, copied from a real log's Format_description event.
func postHeaders10_11() []byte {
	p, err := hex.DecodeString("380d000800120004040404120000e400041a08000000080808020000000a0a0a0000000000000a0a0a" +
		strings.Repeat("00", 160-41) + "041304000d0808080a0a0a")
	if err != nil || len(p) != 171 {
		panic("bad post-header table")
	}
	return p
}

func newSynthLog(crc, inUse bool) *synthLog {
	return newSynthLogFrom("10.11.19-MariaDB-log", postHeaders10_11(), crc, inUse)
}

// newSynthLogFrom starts a log as a server of version with post-header
// lengths phdr would.
func newSynthLogFrom(version string, phdr []byte, crc, inUse bool) *synthLog {
	l := &synthLog{crc: crc, phdr: phdr}
	l.buf.WriteString(magic)
	body := make([]byte, 2+50+4+1)
	binary.LittleEndian.PutUint16(body, 4)
	copy(body[2:], version)
	body[2+50+4] = headerLen
	body = append(body, l.phdr...)
	alg := byte(checksumOff)
	if crc {
		alg = checksumCRC32
	}
	body = append(body, alg)
	// The Format_description event always carries a checksum field, summed
	// with the in-use flag clear.
	ev := l.header(typeFormatDescription, 1, headerLen+len(body)+checksumLen)
	ev = append(ev, body...)
	ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	if inUse {
		ev[offFlags] |= flagInUse
	}
	l.buf.Write(ev)
	l.event(typeGTIDList, 1, make([]byte, 4))
	l.event(typeBinlogCheckpoint, 1, append([]byte{16, 0, 0, 0}, "mysql-bin.000001"...))
	return l
}

func (l *synthLog) header(typ byte, serverID uint32, size int) []byte {
	h := make([]byte, headerLen)
	binary.LittleEndian.PutUint32(h[0:], 1796527935)
	h[offType] = typ
	binary.LittleEndian.PutUint32(h[offServerID:], serverID)
	binary.LittleEndian.PutUint32(h[offSize:], uint32(size))
	binary.LittleEndian.PutUint32(h[offLogPos:], uint32(l.buf.Len()+size))
	return h
}

// event appends one event with body, its checksum if the log has them.
func (l *synthLog) event(typ byte, serverID uint32, body []byte) {
	size := headerLen + len(body)
	if l.crc {
		size += checksumLen
	}
	ev := append(l.header(typ, serverID, size), body...)
	if l.crc {
		ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	}
	l.buf.Write(ev)
}

// transaction appends a GTID event group: GTID, Annotate_rows, Table_map,
// Write_rows (carrying payload), Xid.
func (l *synthLog) transaction(g gtid.MariaDBGTID, payload string) {
	body := binary.LittleEndian.AppendUint64(nil, g.Seq)
	body = binary.LittleEndian.AppendUint32(body, g.Domain)
	body = append(body, 0x0c, 0, 0, 0, 0, 0, 0) // flags2 and padding to the 19-byte post-header
	l.event(typeGTID, g.ServerID, body)
	l.event(typeAnnotateRows, g.ServerID, []byte("INSERT INTO t VALUES "+payload))
	l.event(typeTableMap, g.ServerID, []byte("app.t"))
	l.event(typeWriteRows, g.ServerID, []byte(payload))
	l.event(typeXID, g.ServerID, []byte{1, 2, 3, 4, 5, 6, 7, 8})
}

// statement appends a statement-based transaction: GTID, Query, Xid, which
// mariadb-binlog renders as readable SQL.
func (l *synthLog) statement(g gtid.MariaDBGTID, sql string) {
	body := binary.LittleEndian.AppendUint64(nil, g.Seq)
	body = binary.LittleEndian.AppendUint32(body, g.Domain)
	body = append(body, 0x0c, 0, 0, 0, 0, 0, 0)
	l.event(typeGTID, g.ServerID, body)
	// thread_id, exec_time, db length, error_code, status_vars length; db; query.
	q := []byte{13, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0}
	q = append(q, "app\x00"...)
	l.event(typeQuery, g.ServerID, append(q, sql...))
	l.event(typeXID, g.ServerID, binary.LittleEndian.AppendUint64(nil, g.Seq))
}

func (l *synthLog) rotate(next string) {
	l.event(typeRotate, 1, append(binary.LittleEndian.AppendUint64(nil, 4), next...))
}

func (l *synthLog) write(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, l.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func g(d, s uint32, n uint64) gtid.MariaDBGTID {
	return gtid.MariaDBGTID{Domain: d, ServerID: s, Seq: n}
}

// readAll reads a log back with the package's own reader, which verifies
// sizes and checksums, and returns its events (data copied).
func readAll(t *testing.T, path string) (formatDescription, []event) {
	t.Helper()
	l, err := openLog(path)
	if err != nil {
		t.Fatalf("reading back %s: %v", path, err)
	}
	defer l.Close()
	var evs []event
	for {
		ev, err := l.next()
		if err == io.EOF {
			return l.fde, evs
		}
		if err != nil {
			t.Fatalf("reading back %s: %v", path, err)
		}
		ev.data = append([]byte(nil), ev.data...)
		evs = append(evs, ev)
	}
}

func TestUnitExtractSelectsGroupsAcrossFiles(t *testing.T) {
	for _, tc := range []struct {
		name           string
		crc1, crc2     bool
		wantOutputSums bool
	}{
		{"crc32", true, true, true},
		{"no checksums", false, false, false},
		{"crc32 then none", true, false, true},
		{"none then crc32", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Both logs in use: the first one left so by a crash, the
			// second still being written.
			a := newSynthLog(tc.crc1, true)
			a.transaction(g(0, 1, 1), "shared-1")
			a.transaction(g(0, 2, 2), "leader-has-2")
			a.transaction(g(0, 1, 3), "extra-3")
			a.rotate("mysql-bin.000002")
			b := newSynthLog(tc.crc2, true)
			b.transaction(g(0, 1, 4), "extra-4")
			b.transaction(g(5, 1, 1), "extra-5-1")
			files := []string{a.write(t, dir, "mysql-bin.000001"), b.write(t, dir, "mysql-bin.000002")}

			want, err := NotIn("0-1-1,0-2-2")
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Extract(files, want, f)
			f.Close()
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if s := summarize(got); s != "0-1-3..0-1-4 (2), 5-1-1 (1)" {
				t.Errorf("copied %s, want 0-1-3..0-1-4 (2), 5-1-1 (1)", s)
			}

			fde, evs := readAll(t, out)
			if fde.inUse {
				t.Error("the output's Format_description still has LOG_EVENT_BINLOG_IN_USE_F")
			}
			if (fde.checksum == checksumCRC32) != tc.wantOutputSums {
				t.Errorf("output checksum algorithm %d; want the first file's", fde.checksum)
			}
			var payloads []string
			var gtids []string
			pos := int64(len(magic)) + int64(len(fde.raw))
			for _, ev := range evs {
				size := int64(binary.LittleEndian.Uint32(ev.data[offSize:]))
				if ev.offset != pos {
					t.Errorf("event at %d, want it at %d", ev.offset, pos)
				}
				if lp := binary.LittleEndian.Uint32(ev.data[offLogPos:]); int64(lp) != ev.offset+size {
					t.Errorf("event at %d has log_pos %d, want %d", ev.offset, lp, ev.offset+size)
				}
				pos += size
				switch ev.typ {
				case typeGTID:
					gt, _ := parseGTID(ev)
					gtids = append(gtids, gt.String())
				case typeWriteRows:
					payloads = append(payloads, string(ev.data[headerLen:]))
				case typeRotate, typeGTIDList, typeBinlogCheckpoint, typeFormatDescription:
					t.Errorf("event of type %d copied; it belongs to no transaction", ev.typ)
				}
			}
			if strings.Join(gtids, ",") != "0-1-3,0-1-4,5-1-1" || strings.Join(payloads, ",") != "extra-3,extra-4,extra-5-1" {
				t.Errorf("output holds GTIDs %v with rows %v; want 0-1-3,0-1-4,5-1-1 with extra-3,extra-4,extra-5-1", gtids, payloads)
			}
			if len(evs) != 3*5 {
				t.Errorf("output has %d events, want 3 whole groups of 5", len(evs))
			}
		})
	}
}

func TestUnitExtractNothingSelected(t *testing.T) {
	dir := t.TempDir()
	a := newSynthLog(true, false)
	a.transaction(g(0, 1, 1), "x")
	var out bytes.Buffer
	got, err := Extract([]string{a.write(t, dir, "b.1")}, func(gtid.MariaDBGTID) bool { return false }, &out)
	if err != nil || len(got) != 0 {
		t.Fatalf("Extract = %v, %v; want nothing, no error", got, err)
	}
	// Still a valid, empty log: magic and Format_description.
	path := filepath.Join(dir, "out")
	os.WriteFile(path, out.Bytes(), 0o600)
	if _, evs := readAll(t, path); len(evs) != 0 {
		t.Errorf("empty extract holds %d events", len(evs))
	}
}

// TestUnitExtractBadLogs: every damaged log is a *LogError naming the file
// and the offset of the damage, matching ErrCorrupt or ErrEncrypted.
func TestUnitExtractBadLogs(t *testing.T) {
	good := func() *synthLog {
		l := newSynthLog(true, false)
		l.transaction(g(0, 1, 1), "one")
		return l
	}
	firstGroup := func() int { // offset of the first GTID event
		l := newSynthLog(true, false)
		return l.buf.Len()
	}()
	whole := good().buf.Len()
	lastXID := whole - (headerLen + 8 + checksumLen)

	tests := []struct {
		name     string
		bytes    func() []byte
		sentinel error
		offset   int64
		reason   string
	}{
		{"empty file", func() []byte { return nil }, ErrCorrupt, 0, "too short for a binary log"},
		{"bad magic", func() []byte { b := good().buf.Bytes(); b[1] = 'x'; return b }, ErrCorrupt, 0, "bad magic bytes fe 78 69 6e"},
		{"magic only", func() []byte { return []byte(magic) }, ErrCorrupt, 4, "before the Format_description event"},
		{"first event not a Format_description", func() []byte {
			b := good().buf.Bytes()
			return append([]byte(magic), b[firstGroup:]...)
		}, ErrCorrupt, 4, "want Format_description"},
		{"truncated inside the last event", func() []byte { return good().buf.Bytes()[:whole-3] }, ErrCorrupt, int64(lastXID), "claims 31 bytes but the file ends after 28"},
		{"truncated inside a header", func() []byte { return good().buf.Bytes()[:lastXID+5] }, ErrCorrupt, int64(lastXID), "ends 5 bytes into an event header"},
		{"checksum mismatch in a row event", func() []byte {
			b := good().buf.Bytes()
			i := bytes.Index(b, []byte("one"))
			b[i] = 'O'
			return b
		}, ErrCorrupt, -1, "checksum mismatch"},
		{"checksum mismatch in the Format_description", func() []byte {
			b := good().buf.Bytes()
			b[4+headerLen+5] ^= 0xff // a byte of server_version
			return b
		}, ErrCorrupt, 4, "checksum mismatch"},
		{"event smaller than its header", func() []byte {
			b := good().buf.Bytes()
			binary.LittleEndian.PutUint32(b[lastXID+offSize:], 7)
			return b
		}, ErrCorrupt, int64(lastXID), "event size 7 is smaller than the 19-byte header"},
		{"encrypted", func() []byte {
			l := newSynthLog(true, false)
			l.event(typeStartEncryption, 1, make([]byte, 17))
			l.buf.WriteString("\x8a\x13\x99 ciphertext follows")
			return l.buf.Bytes()
		}, ErrEncrypted, int64(firstGroup), "Start_encryption"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mysql-bin.000007")
			if err := os.WriteFile(path, tc.bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Extract([]string{path}, func(gtid.MariaDBGTID) bool { return true }, io.Discard)
			var le *LogError
			if !errors.As(err, &le) {
				t.Fatalf("Extract error = %v; want a *LogError", err)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not match %v", err, tc.sentinel)
			}
			if le.File != path || (tc.offset >= 0 && le.Offset != tc.offset) {
				t.Errorf("error names %s at offset %d; want %s at %d", le.File, le.Offset, path, tc.offset)
			}
			if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q; want it to name the file and say %q", err, tc.reason)
			}
		})
	}
}

// A truncated tail of a log the server never closed says so: it is the
// current log of a running server or the remains of a crash.
func TestUnitTruncatedInUseLogSaysWhy(t *testing.T) {
	l := newSynthLog(true, true)
	l.transaction(g(0, 1, 1), "one")
	b := l.buf.Bytes()
	path := filepath.Join(t.TempDir(), "mysql-bin.000003")
	os.WriteFile(path, b[:len(b)-1], 0o600)
	_, err := Extract([]string{path}, func(gtid.MariaDBGTID) bool { return true }, io.Discard)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "did not close this log") {
		t.Errorf("error %v; want ErrCorrupt saying the server did not close the log", err)
	}
}

// A corrupt log later in the list fails the whole extract, even when the
// earlier logs held selected groups: a partial save is not a save.
func TestUnitExtractFailsOnLaterCorruptLog(t *testing.T) {
	dir := t.TempDir()
	a := newSynthLog(true, false)
	a.transaction(g(0, 1, 1), "one")
	b := newSynthLog(true, false)
	b.transaction(g(0, 1, 2), "two")
	raw := b.buf.Bytes()
	files := []string{a.write(t, dir, "1"), filepath.Join(dir, "2")}
	os.WriteFile(files[1], raw[:len(raw)-10], 0o600)
	got, err := Extract(files, func(gtid.MariaDBGTID) bool { return true }, io.Discard)
	if err == nil || got != nil {
		t.Fatalf("Extract = %v, %v; want no GTIDs and an error", got, err)
	}
}

func TestUnitExtractRefusesChangedEventLayout(t *testing.T) {
	dir := t.TempDir()
	a := newSynthLog(true, false)
	a.transaction(g(0, 1, 1), "one")
	changed := postHeaders10_11()
	changed[typeWriteRows-1] = 10 // as if a newer server had changed Write_rows
	b := newSynthLogFrom("11.8.2-MariaDB-log", changed, true, false)
	b.transaction(g(0, 1, 2), "two")
	files := []string{a.write(t, dir, "1"), b.write(t, dir, "2")}
	_, err := Extract(files, func(gtid.MariaDBGTID) bool { return true }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "event type 23 has a 10-byte post-header") {
		t.Errorf("Extract error = %v; want it to refuse the changed Write_rows layout", err)
	}
}

func TestUnitExtractNeedsWantAndFiles(t *testing.T) {
	if _, err := Extract(nil, func(gtid.MariaDBGTID) bool { return true }, io.Discard); err == nil || !strings.Contains(err.Error(), "BinaryLogFiles") {
		t.Errorf("no files: %v", err)
	}
	if _, err := Extract([]string{"x"}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "NotIn") {
		t.Errorf("no want: %v", err)
	}
	_, err := Extract([]string{filepath.Join(t.TempDir(), "missing")}, func(gtid.MariaDBGTID) bool { return true }, io.Discard)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want os.ErrNotExist", err)
	}
}
