package realnode

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

type mount struct {
	point  string
	fstype string
}

// readMountinfo parses /proc/self/mountinfo, in mount order.
func readMountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		m := mount{point: unescapeMount(fields[4])}
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				m.fstype = fields[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or below dir, last mounted first.
func mountsUnder(dir string) []string {
	mounts, _ := readMountinfo()
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		p := mounts[i].point
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// unmountUnder unmounts everything at or below dir: overlay rootfs and shm
// of containers, the kubelet's volumes and its rshared root dir. A mount
// still busy is detached.
func unmountUnder(dir string) error {
	for round := 0; round < 10; round++ {
		points := mountsUnder(dir)
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil {
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("still mounted: %v", left)
	}
	return nil
}
