package store

import (
	"testing"
	"time"
)

// A value loaded before a change and kept after that change's forget hid
// the change for maxAge: a 410's disabling of an endpoint was unseen for a
// second of deliveries, on the node that recorded it.
func TestRecentDropsALoadAForgetOvertook(t *testing.T) {
	r := recent[string]{maxAge: time.Hour}
	v, err := r.getOr("k", func() (string, error) {
		r.forget("k") // the change commits and forgets while this load runs
		return "old", nil
	})
	if err != nil || v != "old" {
		t.Fatalf("getOr: %q, %v", v, err)
	}
	if got, ok := r.get("k"); ok {
		t.Fatalf("kept %q, read before the forget", got)
	}
	v, _ = r.getOr("k", func() (string, error) { return "new", nil })
	if got, ok := r.get("k"); v != "new" || !ok || got != "new" {
		t.Fatalf("after the forget: %q, kept %q %v", v, got, ok)
	}
	r.getOr("other", func() (string, error) {
		r.forgetAll()
		return "old", nil
	})
	if _, ok := r.get("other"); ok {
		t.Fatal("kept a load that forgetAll overtook")
	}
}
