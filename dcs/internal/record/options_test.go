package record

import (
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestStoreOptionsWithDefaults(t *testing.T) {
	o, err := StoreOptions{Member: "m0"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Member != "m0" || dcs.ValidateInstance(o.Instance) != nil || o.Clock != (clock.RealClock{}) || o.Logger == nil ||
		o.MemberTTL != dcs.DefaultMemberTTL || o.MemberRefresh != dcs.DefaultMemberRefresh {
		t.Fatalf("defaults: %+v", o)
	}
	given := StoreOptions{Member: "m0", Instance: "given-1", MemberTTL: 4 * time.Second, MemberRefresh: time.Second}
	if o, err := given.WithDefaults(); err != nil || o.Instance != "given-1" || o.MemberTTL != 4*time.Second || o.MemberRefresh != time.Second {
		t.Fatalf("given values: %+v, %v; want them kept", o, err)
	}
	for _, bad := range []StoreOptions{
		{},
		{Member: "UPPER"},
		{Member: "m0", Instance: "a/b"},
		{Member: "m0", MemberTTL: 5 * time.Second, MemberRefresh: 10 * time.Second},
		{Member: "m0", MemberTTL: dcs.MaxTTL + time.Second},
	} {
		if _, err := bad.WithDefaults(); !errors.Is(err, dcs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}
