package mysqlctl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Version is a server release number, e.g. 8.4.3 or 10.11.9.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v >= major.minor.patch.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// Minimum supported releases: MySQL 8.0.26 is the first with the
// rpl_semi_sync_source/_replica plugins and REPLICA/SOURCE syntax throughout;
// MariaDB 10.6 is the oldest maintained release with SHOW REPLICA STATUS.
var (
	minMySQL   = Version{8, 0, 26}
	minMariaDB = Version{10, 6, 0}
)

// ServerInfo identifies a server's flavor and release.
type ServerInfo struct {
	// Flavor is the server family; the two speak different SQL for the same
	// operation (see Dialect). ParseServerVersion always sets it, so the
	// zero value, which is no flavor, appears only in hand-built values.
	Flavor  gtid.Flavor
	Version Version
	// Raw is @@version as the server reported it.
	Raw string
}

// ParseServerVersion classifies the output of SELECT @@version (for example
// "8.4.3", "8.0.36-log" or "10.11.19-MariaDB-0+deb12u1-log") and rejects
// releases this agent does not support.
func ParseServerVersion(raw string) (ServerInfo, error) {
	info := ServerInfo{Raw: raw, Flavor: gtid.MySQL}
	if strings.Contains(strings.ToLower(raw), "mariadb") {
		info.Flavor = gtid.MariaDB
	}
	numbers, _, _ := strings.Cut(raw, "-")
	parts := strings.Split(numbers, ".")
	if len(parts) < 2 {
		return ServerInfo{}, fmt.Errorf("%w: cannot parse server version %q; expected MAJOR.MINOR.PATCH", ErrUnsupported, raw)
	}
	nums := make([]int, 3)
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return ServerInfo{}, fmt.Errorf("%w: cannot parse server version %q; expected MAJOR.MINOR.PATCH", ErrUnsupported, raw)
		}
		nums[i] = n
	}
	info.Version = Version{nums[0], nums[1], nums[2]}

	minimum := minMySQL
	if info.Flavor == gtid.MariaDB {
		minimum = minMariaDB
	}
	if !info.Version.AtLeast(minimum.Major, minimum.Minor, minimum.Patch) {
		return ServerInfo{}, fmt.Errorf("%w: %s %s is older than the minimum supported %s %s; upgrade the server",
			ErrUnsupported, info.Flavor, info.Version, info.Flavor, minimum)
	}
	return info, nil
}
