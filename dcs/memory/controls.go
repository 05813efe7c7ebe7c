package memory

// Partition makes every call of member's stores fail with dcs.ErrUnreachable
// and freezes their snapshots, until Heal.
func (srv *Server) Partition(member string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.partitioned[member] = true
}

// Heal ends a Partition; the member's stores catch up at once.
func (srv *Server) Heal(member string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	delete(srv.partitioned, member)
	srv.syncLocked()
}

// ExpireLeader makes the lock expire now, as if its holder had stopped
// renewing for ttl: the holder's RenewLeader fails with ErrNotLeader and
// others may acquire at once.
func (srv *Server) ExpireLeader() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if l := srv.st.leader; l != nil && l.holder != "" {
		n := *l
		n.holder, n.instance = "", ""
		n.rev = srv.nextRev()
		srv.st.leader = &n
		srv.syncLocked()
	}
}

// Holder returns the current lock holder, "" for none.
func (srv *Server) Holder() string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.st.leader == nil {
		return ""
	}
	return srv.st.leader.holder
}

// Requests returns how many calls the stores made to the Server.
func (srv *Server) Requests() int64 {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.requests
}
