package salvage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// MariaDB binary log format, version 4: the magic bytes, then events, each a
// 19-byte little-endian header (timestamp u32, type u8, server_id u32,
// event_size u32, log_pos u32, flags u16) and a body. event_size counts the
// whole event, checksum included; log_pos is where the event ends.
const (
	magic       = "\xfebin"
	headerLen   = 19
	checksumLen = 4

	offType     = 4
	offServerID = 5
	offSize     = 9
	offLogPos   = 13
	offFlags    = 17
)

// Event types that matter here.
const (
	typeStop              = 3
	typeRotate            = 4
	typeFormatDescription = 15
	typeBinlogCheckpoint  = 161
	typeGTID              = 162
	typeGTIDList          = 163
	typeStartEncryption   = 164
)

const (
	// flagInUse in the Format_description header marks a log the server has
	// not closed: it is being written, or the server crashed.
	flagInUse = 0x1

	checksumOff   = 0
	checksumCRC32 = 1

	// fdeFixedLen is the Format_description body before the post-header
	// lengths: binlog_version u16, server_version [50]byte,
	// create_timestamp u32, header_length u8.
	fdeFixedLen = 2 + 50 + 4 + 1
	// gtidBodyMin is the MariaDB GTID body this package reads: seq_no u64,
	// domain_id u32, flags2 u8.
	gtidBodyMin = 8 + 4 + 1
)

// Sentinel errors a [LogError] wraps, for callers that branch on the cause.
var (
	// ErrCorrupt: a binary log is truncated, damaged or not a binary log.
	ErrCorrupt = errors.New("salvage: binary log corrupt")
	// ErrEncrypted: a binary log is encrypted (binlog encryption is on).
	ErrEncrypted = errors.New("salvage: binary log encrypted")
)

// LogError is a problem found in a binary log file at a byte offset.
type LogError struct {
	File   string
	Offset int64
	Reason string
	Err    error // ErrCorrupt or ErrEncrypted
}

func (e *LogError) Error() string {
	return fmt.Sprintf("binary log %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

func (e *LogError) Unwrap() error { return e.Err }

// formatDescription is what this package needs of a log's
// Format_description event.
type formatDescription struct {
	raw           []byte // the whole event, checksum field included
	serverVersion string
	postHeader    []byte // post-header length of event type t at t-1
	checksum      byte   // checksumOff or checksumCRC32, for every later event
	inUse         bool
}

// postHeaderLen returns the post-header length of event type t and whether
// the log declares one.
func (f *formatDescription) postHeaderLen(t byte) (byte, bool) {
	if t == 0 || int(t) > len(f.postHeader) {
		return 0, false
	}
	return f.postHeader[t-1], true
}

// event is one event as read, without its checksum.
type event struct {
	offset   int64
	typ      byte
	serverID uint32
	data     []byte // header and body; valid until the next read
}

// logReader reads one binary log file's events in order and verifies each.
// It reads up to the size the file had when opened; the log a server is
// writing may end there inside an event, which reads as truncated.
type logReader struct {
	path string
	f    *os.File
	r    *bufio.Reader
	size int64 // at open; anything appended later is not read
	off  int64
	fde  formatDescription
	buf  []byte
}

// openLog opens path, checks the magic bytes and reads the
// Format_description event that starts every version 4 log.
func openLog(path string) (*logReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening binary log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reading binary log: %w", err)
	}
	l := &logReader{path: path, f: f, r: bufio.NewReaderSize(f, 1<<16), size: st.Size()}
	if err := l.start(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func (l *logReader) Close() error { return l.f.Close() }

func (l *logReader) fail(off int64, format string, args ...any) error {
	return &LogError{File: l.path, Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

func (l *logReader) start() error {
	var m [len(magic)]byte
	if _, err := io.ReadFull(l.r, m[:]); err != nil {
		return l.fail(0, "the file is %d bytes, too short for a binary log", l.size)
	}
	if string(m[:]) != magic {
		return l.fail(0, "bad magic bytes % x (want fe 62 69 6e): not a binary log", m)
	}
	l.off = int64(len(magic))
	raw, err := l.readRaw()
	if err == io.EOF {
		return l.fail(l.off, "the file ends after the magic bytes, before the Format_description event")
	}
	if err != nil {
		return err
	}
	if t := raw[offType]; t != typeFormatDescription {
		return l.fail(int64(len(magic)), "first event has type %d, want Format_description (15): "+
			"only version 4 binary logs (MariaDB 10.0 and later) are supported", t)
	}
	return l.parseFDE(raw)
}

// parseFDE reads the Format_description event raw. Every server that writes
// MariaDB GTID events (MariaDB 10.0 and later) ends this event with the
// checksum algorithm byte and a 4-byte checksum field, whatever the algorithm.
func (l *logReader) parseFDE(raw []byte) error {
	at := int64(len(magic))
	body := raw[headerLen:]
	if len(body) < fdeFixedLen+1+checksumLen {
		return l.fail(at, "Format_description event of %d bytes is too short", len(raw))
	}
	if v := binary.LittleEndian.Uint16(body); v != 4 {
		return l.fail(at, "binlog_version %d, want 4", v)
	}
	if h := body[fdeFixedLen-1]; h != headerLen {
		return l.fail(at, "event header length %d, want %d", h, headerLen)
	}
	alg := body[len(body)-checksumLen-1]
	inUse := binary.LittleEndian.Uint16(raw[offFlags:])&flagInUse != 0
	switch alg {
	case checksumCRC32:
		// The server sums this event with the in-use flag clear, then sets
		// the flag in the file, and clears it again when it closes the log
		// without rewriting the checksum.
		sum := append([]byte(nil), raw...)
		sum[offFlags] &^= flagInUse
		if err := l.verifyCRC(at, sum); err != nil {
			return err
		}
	case checksumOff:
	default:
		return l.fail(at, "unknown checksum algorithm %d (want 0 for none or 1 for CRC32)", alg)
	}
	version := body[2 : 2+50]
	if n := bytes.IndexByte(version, 0); n >= 0 {
		version = version[:n]
	}
	l.fde = formatDescription{
		raw:           append([]byte(nil), raw...),
		serverVersion: string(version),
		postHeader:    append([]byte(nil), body[fdeFixedLen:len(body)-checksumLen-1]...),
		checksum:      alg,
		inUse:         inUse,
	}
	return nil
}

func (l *logReader) verifyCRC(at int64, raw []byte) error {
	n := len(raw) - checksumLen
	stored := binary.LittleEndian.Uint32(raw[n:])
	if sum := crc32.ChecksumIEEE(raw[:n]); sum != stored {
		return l.fail(at, "checksum mismatch: event stores %08x, its bytes sum to %08x", stored, sum)
	}
	return nil
}

// readRaw reads the next whole event at l.off, checksum included, checking
// only that it fits in the file. It returns io.EOF at the end of the file.
func (l *logReader) readRaw() ([]byte, error) {
	at := l.off
	left := l.size - at
	if left == 0 {
		return nil, io.EOF
	}
	if left < headerLen {
		return nil, l.fail(at, "the file ends %d bytes into an event header%s", left, l.crashHint())
	}
	if cap(l.buf) < headerLen {
		l.buf = make([]byte, headerLen, 1<<16)
	}
	hdr := l.buf[:headerLen]
	if _, err := io.ReadFull(l.r, hdr); err != nil {
		return nil, l.readFailed(at, err)
	}
	size := int64(binary.LittleEndian.Uint32(hdr[offSize:]))
	if size < headerLen {
		return nil, l.fail(at, "event size %d is smaller than the %d-byte header", size, headerLen)
	}
	if size > left {
		return nil, l.fail(at, "event of type %d claims %d bytes but the file ends after %d%s",
			hdr[offType], size, left, l.crashHint())
	}
	if int64(cap(l.buf)) < size {
		grown := make([]byte, size)
		copy(grown, hdr)
		l.buf = grown
	}
	raw := l.buf[:size]
	if _, err := io.ReadFull(l.r, raw[headerLen:]); err != nil {
		return nil, l.readFailed(at, err)
	}
	l.off += size
	return raw, nil
}

func (l *logReader) readFailed(at int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The file shrank after it was opened.
		return l.fail(at, "the file ended early while it was read (was it truncated meanwhile?)")
	}
	return fmt.Errorf("reading binary log %s at offset %d: %w", l.path, at, err)
}

func (l *logReader) crashHint() string {
	if l.fde.inUse {
		return "; the server did not close this log: it is still writing it, or it crashed mid-write"
	}
	return ""
}

// next returns the next event, its checksum verified and removed, or io.EOF
// at the end of the file. A Start_encryption event is an [ErrEncrypted]
// error: what follows it cannot be read without the server's key.
func (l *logReader) next() (event, error) {
	at := l.off
	raw, err := l.readRaw()
	if err != nil {
		return event{}, err
	}
	if l.fde.checksum == checksumCRC32 {
		if len(raw) < headerLen+checksumLen {
			return event{}, l.fail(at, "event size %d leaves no room for its checksum", len(raw))
		}
		if err := l.verifyCRC(at, raw); err != nil {
			return event{}, err
		}
		raw = raw[:len(raw)-checksumLen]
	}
	ev := event{
		offset:   at,
		typ:      raw[offType],
		serverID: binary.LittleEndian.Uint32(raw[offServerID:]),
		data:     raw,
	}
	if ev.typ == typeStartEncryption {
		return event{}, &LogError{File: l.path, Offset: at, Err: ErrEncrypted,
			Reason: "the log is encrypted (Start_encryption event; encrypt_binlog is on) and cannot be read from the file; " +
				"save the transactions by hand with mariadb-binlog --read-from-remote-server against this server, then rebuild it"}
	}
	return ev, nil
}
