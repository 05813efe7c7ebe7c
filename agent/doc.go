// Package agent is the HA sidecar: one goroutine owns the member's state and
// runs observe (mysqlctl, DCS) -> decide (failover.Decide) -> act, plus the
// HTTP API, metrics and the pod labeler. Only cmd/agent imports it.
//
// Not built yet: see the open issue "The agent: HA loop ...".
package agent
