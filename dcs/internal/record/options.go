package record

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
)

// StoreOptions are the options every backend's store takes; each backend's
// Options has these fields under the same names.
type StoreOptions struct {
	Member                   string
	Instance                 string
	Clock                    clock.Clock
	Logger                   *zap.Logger
	MemberTTL, MemberRefresh time.Duration
}

// WithDefaults checks the options every backend's store takes and fills in
// their defaults, the same for all backends: Member must be a valid name;
// Instance is checked, or drawn at random when empty (storeInstance); Clock
// defaults to clock.RealClock{} and Logger to zap.NewNop(); MemberTTL and
// MemberRefresh default to dcs.DefaultMemberTTL and dcs.DefaultMemberRefresh
// and must fit each other (memberTiming). Errors wrap dcs.ErrInvalid.
func (o StoreOptions) WithDefaults() (StoreOptions, error) {
	if err := dcs.ValidateName("member", o.Member); err != nil {
		return StoreOptions{}, err
	}
	var err error
	if o.Instance, err = storeInstance(o.Instance); err != nil {
		return StoreOptions{}, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.MemberTTL, o.MemberRefresh, err = memberTiming(o.MemberTTL, o.MemberRefresh); err != nil {
		return StoreOptions{}, err
	}
	return o, nil
}

// storeInstance returns the instance id a store is built with: opt after
// checking it, or a fresh dcs.NewInstance when opt is empty.
func storeInstance(opt string) (string, error) {
	if opt == "" {
		return dcs.NewInstance(), nil
	}
	if err := dcs.ValidateInstance(opt); err != nil {
		return "", fmt.Errorf("options: %w; or leave Instance empty to draw a random one", err)
	}
	return opt, nil
}

// memberTiming applies the defaults to a store's member ttl and refresh
// interval and checks them.
func memberTiming(ttl, refresh time.Duration) (time.Duration, time.Duration, error) {
	if ttl == 0 {
		ttl = dcs.DefaultMemberTTL
	}
	if refresh == 0 {
		refresh = dcs.DefaultMemberRefresh
	}
	if err := dcs.ValidateTTL(ttl); err != nil {
		return 0, 0, fmt.Errorf("member ttl: %w", err)
	}
	if refresh <= 0 || refresh >= ttl {
		return 0, 0, fmt.Errorf("%w: member refresh %v must be > 0 and below member ttl %v", dcs.ErrInvalid, refresh, ttl)
	}
	return ttl, refresh, nil
}
