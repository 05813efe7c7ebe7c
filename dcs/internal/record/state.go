package record

import "github.com/mysqlha/mysqlha/dcs"

// Stored is one encoded cluster-state record as a backend found it.
type Stored struct {
	// Where names the key, or the object and annotation, in errors.
	Where string
	// Data is the record's encoding.
	Data []byte
	// Version is the backend's version of the record, which the caller
	// passes back to compare-and-set (Cluster.ConfigVersion,
	// Switchover.Version, Initialized.Version). Unused for the history.
	Version string
}

// StoredState holds the cluster-state records a backend found; a nil field
// means that record is not stored.
type StoredState struct {
	Config, Switchover, Reinit, Restart, Initialized, History *Stored
}

// DecodeState fills the cluster-state fields of c (Config, ConfigErr,
// ConfigVersion, Switchover, Reinit, Restart, Initialized, History) from st, for the
// backends that store encoded records. c.Config must hold the fallback
// config: the last valid one the store read, or dcs.DefaultConfig(). Each
// unreadable record is appended to c.Problems and read as the safe value
// its Cluster field documents: the config keeps the fallback and sets
// ConfigErr; an unreadable switchover request or initialized record is
// still there, with Err set, so that it is neither acted on nor
// overwritten as absent; an unreadable history reads as empty. Afterwards
// c.Config is the store's new last valid config.
func DecodeState(c *dcs.Cluster, st StoredState) {
	if r := st.Config; r != nil {
		cfg, err := DecodeConfig(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
			c.ConfigErr = err
		} else {
			c.Config = cfg
		}
		c.ConfigVersion = r.Version
	}
	if r := st.Switchover; r != nil {
		sw, err := DecodeSwitchover(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
			sw.Err = err
		}
		sw.Version = r.Version
		c.Switchover = &sw
	}
	if r := st.Reinit; r != nil {
		ri, err := DecodeReinit(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
			ri.Err = err
		}
		ri.Version = r.Version
		c.Reinit = &ri
	}
	if r := st.Restart; r != nil {
		rs, err := DecodeRestart(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
			rs.Err = err
		}
		rs.Version = r.Version
		c.Restart = &rs
	}
	if r := st.Initialized; r != nil {
		in, err := DecodeInitialized(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
			in.Err = err
		}
		in.Version = r.Version
		c.Initialized = &in
	}
	if r := st.History; r != nil {
		h, err := DecodeHistory(r.Where, r.Data)
		if err != nil {
			c.Problems = append(c.Problems, err)
		}
		c.History = h
	}
}
