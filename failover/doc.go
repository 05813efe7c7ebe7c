// Package failover holds the pure HA decisions: Decide(snapshot) -> action,
// candidate ranking and switchover/failover plans. It performs no I/O and
// imports only the standard library and mysqlctl/gtid.
//
// Not built yet: see the open issue "The agent: HA loop ...".
package failover
