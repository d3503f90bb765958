package form

import "github.com/kadipay/kadi/internal/secret"

// OpenPageURL reads what a hosted page's URL id carries, sealed by s (the
// gateway's "hosted-pages" sealer), so a test can check what it holds.
func OpenPageURL(s *secret.Sealer, id string) ([]byte, error) { return s.OpenURL(id, pageBinding) }
