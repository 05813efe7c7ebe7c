// Package ctl implements agentctl's commands: status, switchover, failover,
// pause, resume and history. It talks only to the DCS, so it works from a
// laptop (kubeconfig or etcd endpoints) as well as from inside a pod, and
// needs no network path to the database pods: mutating commands write
// requests that the agents carry out.
//
// Every failure is an *Error with a distinct exit code, so scripts can branch
// on what went wrong.
//
// It depends on dcs, failover and mysqlctl/gtid only, never on the agent: the agents and
// agentctl meet in the DCS records. Only cmd/agentctl imports it.
package ctl
