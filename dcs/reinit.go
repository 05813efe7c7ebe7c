package dcs

// ReinitPending reports whether a readable reinit request names member:
// its data is about to be replaced, so it must not be chosen to lead.
func (c *Cluster) ReinitPending(member string) bool {
	return c.Reinit != nil && c.Reinit.Err == nil && c.Reinit.Member == member
}
