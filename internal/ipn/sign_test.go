package ipn

import (
	"errors"
	"testing"
	"time"
)

// The Standard Webhooks specification's published test vector.
func TestSignVector(t *testing.T) {
	key, err := SigningKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestSigningKeyRefuses(t *testing.T) {
	for _, s := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!"} {
		if _, err := SigningKey(s); !errors.Is(err, ErrBadSecret) {
			t.Errorf("SigningKey(%q) = %v, want ErrBadSecret", s, err)
		}
	}
}
