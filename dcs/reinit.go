package dcs

// ReinitPending reports whether a readable reinit request names member:
// its data is about to be replaced, so it must not be chosen to lead.
func (c *Cluster) ReinitPending(member string) bool {
	return c.Reinit != nil && c.Reinit.Err == nil && c.Reinit.Member == member
}

// RestartPending reports whether a readable restart request names member:
// its mysqld is about to go down, so it must not be chosen to lead.
func (c *Cluster) RestartPending(member string) bool {
	return c.Restart != nil && c.Restart.Err == nil && c.Restart.Member == member
}
