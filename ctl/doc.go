// Package ctl implements agentctl's commands: status, switchover, failover,
// pause, resume, history, show-config, set-config, edit-config, describe,
// remove and version.
// It talks only to the DCS, so it works from a laptop (kubeconfig or etcd
// endpoints) as well as from inside a pod, and needs no network path to the
// database pods: mutating commands write requests or records that the
// agents act on.
//
// A config change is validated by the rule the agents check at start-up
// (dcs.Config.Validate) and written with its history entry in one
// compare-and-set on the config's version (dcs.Store.ChangeConfig): it lands
// whole or not at all. A member's record is removed only when the DCS
// backend judges the member gone (dcs.Store.DeleteMember).
//
// Every failure is an *Error with a distinct exit code, so scripts can branch
// on what went wrong. With CLI.Output JSON or YAML, a command that changes
// the cluster prints one Result object on Out and its prose on Err.
//
// It depends on dcs, failover and mysqlctl/gtid only, never on the agent: the agents and
// agentctl meet in the DCS records. Only ctl/cli, agentctl's
// command line, imports it.
package ctl
