// Package i18n holds the hosted pages' languages. A message's id is its
// English text (as gettext does), so templates and code read naturally
// and English needs no catalogue; every other language is one file with a
// map from each id in Messages to its translation, and a test holds every
// catalogue to every id. Messages sent to merchants (callbacks, IPN) are not
// translated: integrations parse them.
package i18n

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kadipay/kadi/internal/money"
)

// Lang is one language of the pages.
type Lang struct {
	Tag  string // BCP 47, for <html lang>
	Name string // in the language itself, for the switch
	msgs map[string]string
}

// English is the default and the language of every message id. Its few
// entries word a message id (English the shop hears) for the shopper, in
// the words the page used: the challenge page asks to "confirm it's you"
// with a "verification code", never naming 3-D Secure.
var English = &Lang{Tag: "en", Name: "English", msgs: map[string]string{
	"3-D Secure authentication failed":                    "The verification code was not accepted",
	"3-D Secure authentication was not completed in time": "The verification was not completed in time",
}}

// all lists the languages in the switch's order. A new language is a file
// declaring its Lang and one line here.
var all = []*Lang{English, Swahili}

// All returns the languages, in the switch's order.
func All() []*Lang { return all }

// ByTag finds a language by its tag ("sw", "sw-KE"), or nil.
func ByTag(tag string) *Lang {
	primary, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
	for _, l := range all {
		if l.Tag == primary {
			return l
		}
	}
	return nil
}

// Negotiate picks the language an Accept-Language header prefers most
// among ours, English when none.
func Negotiate(header string) *Lang {
	best, bestQ := English, -1.0
	for _, part := range strings.Split(header, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		if l := ByTag(tag); l != nil && q > bestQ && q > 0 {
			best, bestQ = l, q
		}
	}
	return best
}

// T translates the message id and formats it with args (fmt verbs).
func (l *Lang) T(id string, args ...any) string {
	s := id
	if t, ok := l.msgs[id]; ok {
		s = t
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Has reports whether id reads in l: always in English, the language of
// the ids; elsewhere only when the catalogue has it. A message from
// outside the catalogue (a connector's decline text, a developer's
// detail) is shown as it is, marked as English, never as if it were l's.
func (l *Lang) Has(id string) bool {
	if l == English {
		return true
	}
	_, ok := l.msgs[id]
	return ok
}

// Amount writes an amount for people: the currency's digits, grouped by
// thousands. Kenyan and Tanzanian Swahili group and separate as English
// does (1,500.00), so both use money's one grouping.
func (l *Lang) Amount(a money.Amount) string { return a.Currency.Code + " " + a.Grouped() }
