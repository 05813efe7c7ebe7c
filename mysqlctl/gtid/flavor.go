package gtid

import "strconv"

// Flavor is the server family, and the project's only flavor type: it
// selects which GTID syntax and semantics apply here, and which SQL
// mysqlctl.Dialect speaks. The zero value is deliberately not a flavor, so
// an unset configuration field is caught instead of silently meaning MySQL.
type Flavor int

const (
	MySQL   Flavor = iota + 1 // Oracle MySQL and Percona Server: uuid-based GTID sets
	MariaDB                   // MariaDB: domain-server-seq positions
)

// String is "mysql" or "mariadb"; anything else, the zero value included,
// prints as Flavor(N) so an error naming it shows the bad value.
func (f Flavor) String() string {
	switch f {
	case MySQL:
		return "mysql"
	case MariaDB:
		return "mariadb"
	}
	return "Flavor(" + strconv.Itoa(int(f)) + ")"
}

// syntax is the accepted input form, quoted in parse errors.
func (f Flavor) syntax() string {
	switch f {
	case MySQL:
		return "uuid:N[-M][:N[-M]...]"
	case MariaDB:
		return "domain-server-seq[,domain-server-seq...]"
	}
	return ""
}
