package bill

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

// fieldCase is one value for one field. An empty code means the value is
// accepted; want is then the normalised value Validate keeps.
type fieldCase struct {
	name  string
	value any
	code  string
	want  string
}

func runFieldCases(t *testing.T, field string, got func(Bill) string, tests []fieldCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := validate(t, validBody().with(field, tt.value), DefaultPolicy())
			if tt.code != "" {
				wantOnly(t, err, field, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("%s = %#v refused: %v", field, tt.value, err)
			}
			if g := got(b); g != tt.want {
				t.Errorf("%s = %#v normalised to %q, want %q", field, tt.value, g, tt.want)
			}
		})
	}
}

func TestValidateCustomerName(t *testing.T) {
	runFieldCases(t, "customer.name", func(b Bill) string { return b.CustomerName }, []fieldCase{
		{"letters apostrophe hyphen", "Zoë Wanjiru-O'Neil", "", "Zoë Wanjiru-O'Neil"},
		{"dot", "J. K. Mwangi Jr.", "", "J. K. Mwangi Jr."},
		{"digits", "Agent 007", "", "Agent 007"},
		{"vietnamese", "Nguyễn Thị Minh", "", "Nguyễn Thị Minh"},
		{"arabic", "محمد علي", "", "محمد علي"},
		{"chinese", "王小明", "", "王小明"},
		{"decomposed diaeresis", "Zoe\u0308", "", "Zoe\u0308"},
		{"one character", "Q", "", "Q"},
		{"50 characters", strings.Repeat("a", 50), "", strings.Repeat("a", 50)},
		{"50 two-byte characters", strings.Repeat("ë", 50), "", strings.Repeat("ë", 50)},
		{"51 characters", strings.Repeat("a", 51), CodeTooLong, ""},
		{"51 two-byte characters", strings.Repeat("ë", 51), CodeTooLong, ""},
		// As a phone keyboard may send them: e and a combining diaeresis.
		{"50 decomposed characters", strings.Repeat("e\u0308", 50), "", strings.Repeat("e\u0308", 50)},
		{"51 decomposed characters", strings.Repeat("e\u0308", 51), CodeTooLong, ""},
		{"length counted after trimming", "  " + strings.Repeat("a", 50) + "  ", "", strings.Repeat("a", 50)},
		{"leading and trailing spaces trimmed", "  Zoë Wanjiru  ", "", "Zoë Wanjiru"},
		{"JSON number kept as its text", raw("123"), "", "123"},
		{"13 digits that are no card", "1234567890123", "", "1234567890123"},
		{"a card number", "4242424242424242", CodeCardNumber, ""},
		{"a card number in groups", "Zoe 4242 4242 4242 4242", CodeCardNumber, ""},
		{"a card number in groups two spaces apart", "4242  4242  4242  4242", CodeCardNumber, ""},
		{"a card number in spaced dashes", "4242 - 4242 - 4242 - 4242", CodeCardNumber, ""},
		{"a card number sent as a JSON number", raw("5555555555554444"), CodeCardNumber, ""},

		{"angle bracket", "<b>Zoë</b>", CodeInvalidCharacters, ""},
		{"at sign", "zoe@example.com", CodeInvalidCharacters, ""},
		{"underscore", "Zoë_Wanjiru", CodeInvalidCharacters, ""},
		{"comma", "Wanjiru, Zoë", CodeInvalidCharacters, ""},
		{"ampersand", "Zoë & Co", CodeInvalidCharacters, ""},
		{"emoji", "Zoë 😀", CodeInvalidCharacters, ""},
		{"tab inside", "Zoë\tWanjiru", CodeInvalidCharacters, ""},
		{"newline inside", "Zoë\nWanjiru", CodeInvalidCharacters, ""},
		{"carriage return inside", "Zoë\rWanjiru", CodeInvalidCharacters, ""},
		{"NUL inside", "Zoë\x00Wanjiru", CodeInvalidCharacters, ""},
		{"DEL inside", "Zoë\x7fWanjiru", CodeInvalidCharacters, ""},
		{"C1 control inside", "Zoë\u0085Wanjiru", CodeInvalidCharacters, ""},
		{"no-break space inside", "Zoë\u00a0Wanjiru", CodeInvalidCharacters, ""},
		{"zero-width space", "Zoë\u200bWanjiru", CodeInvalidCharacters, ""},
		{"right-to-left override", "Zoë\u202eWanjiru", CodeInvalidCharacters, ""},
		{"replacement character", raw(`"Zo\ufffd"`), CodeInvalidCharacters, ""},
	})
}

func TestValidateOrderReference(t *testing.T) {
	runFieldCases(t, "order.reference", func(b Bill) string { return b.OrderReference }, []fieldCase{
		{"letters and digits", "ORD1001", "", "ORD1001"},
		{"digits a card number could have", "4242424242424242", "", "4242424242424242"}, // an identifier, not free text
		{"lower case", "ord1001", "", "ord1001"},
		{"one character", "7", "", "7"},
		{"20 characters", strings.Repeat("A", 20), "", strings.Repeat("A", 20)},
		{"21 characters", strings.Repeat("A", 21), CodeTooLong, ""},
		{"trimmed", "  ORD1001 ", "", "ORD1001"},
		{"JSON number kept as its text", raw("1001"), "", "1001"},

		{"hyphen", "ORD-1001", CodeInvalidCharacters, ""},
		{"space inside", "ORD 1001", CodeInvalidCharacters, ""},
		{"underscore", "ORD_1001", CodeInvalidCharacters, ""},
		{"slash", "ORD/1001", CodeInvalidCharacters, ""},
		{"non-ASCII letter", "ORDé1001", CodeInvalidCharacters, ""},
		{"full-width digits", "１２３", CodeInvalidCharacters, ""},
		{"arabic-indic digits", "١٢٣", CodeInvalidCharacters, ""},
		{"tab inside", "ORD\t1001", CodeInvalidCharacters, ""},
		{"NUL inside", "ORD\x001001", CodeInvalidCharacters, ""},
		{"JSON decimal number", raw("10.5"), CodeInvalidCharacters, ""},
		{"JSON negative number", raw("-5"), CodeInvalidCharacters, ""},
		// A number with an exponent is kept as written, not read as the
		// number it stands for: only the amount is.
		{"JSON number with an exponent", raw("1E5"), "", "1E5"},
	})
}

func TestValidateDescription(t *testing.T) {
	runFieldCases(t, "order.description", func(b Bill) string { return b.Description }, []fieldCase{
		{"every allowed punctuation", "Order #1001 (2 items): shoes, socks / size 42.", "", "Order #1001 (2 items): shoes, socks / size 42."},
		{"hyphen", "Pre-order", "", "Pre-order"},
		{"a long number that passes Luhn but is no card", "Invoice 1000000000000008", "", "Invoice 1000000000000008"},
		{"a card number", "card 5555-5555-5555-4444", CodeCardNumber, ""},
		{"a card number in commas", "card 5555,5555,5555,4444", CodeCardNumber, ""},
		{"a card number in hashes", "5555#5555#5555#4444", CodeCardNumber, ""},
		{"a card number run into its expiry and code", "ref 55555555555544441230123", CodeCardNumber, ""},
		{"unicode letters", "Café crème für Zoë", "", "Café crème für Zoë"},
		{"one character", "x", "", "x"},
		{"70 characters", strings.Repeat("x", 70), "", strings.Repeat("x", 70)},
		{"70 two-byte characters", strings.Repeat("é", 70), "", strings.Repeat("é", 70)},
		{"71 characters", strings.Repeat("x", 71), CodeTooLong, ""},
		{"71 two-byte characters", strings.Repeat("é", 71), CodeTooLong, ""},
		{"70 decomposed characters", strings.Repeat("e\u0301", 70), "", strings.Repeat("e\u0301", 70)},
		{"trimmed", "  Shoes  ", "", "Shoes"},
		{"JSON number kept as its text", raw("42"), "", "42"},

		{"exclamation mark", "Buy now!", CodeInvalidCharacters, ""},
		{"angle bracket", "<script>", CodeInvalidCharacters, ""},
		{"apostrophe is not in the description set", "Men's shoes", CodeInvalidCharacters, ""},
		{"percent", "50% off", CodeInvalidCharacters, ""},
		{"ampersand", "Shoes & socks", CodeInvalidCharacters, ""},
		{"semicolon", "Shoes; socks", CodeInvalidCharacters, ""},
		{"underscore", "shoes_socks", CodeInvalidCharacters, ""},
		{"quote", `"Shoes"`, CodeInvalidCharacters, ""},
		{"emoji", "Shoes 👟", CodeInvalidCharacters, ""},
		{"newline inside", "Shoes\nsocks", CodeInvalidCharacters, ""},
		{"tab inside", "Shoes\tsocks", CodeInvalidCharacters, ""},
		{"zero-width joiner", "Shoes\u200dsocks", CodeInvalidCharacters, ""},
	})
}

func TestValidateAmount(t *testing.T) {
	tests := []struct {
		name     string
		currency string
		amount   any
		policy   func(*Policy)
		code     string
		minor    int64 // when accepted
	}{
		{"whole", "KES", "1500", nil, "", 150000},
		{"one decimal", "KES", "1500.5", nil, "", 150050},
		{"two decimals", "KES", "1500.00", nil, "", 150000},
		{"smallest unit", "KES", "0.01", nil, "", 1},
		{"JSON number", "KES", raw("1000"), nil, "", 100000},
		{"JSON decimal number", "KES", raw("1500.50"), nil, "", 150050},
		{"surrounding spaces trimmed", "KES", " 12 ", nil, "", 1200},
		{"KES three decimals", "KES", "1.001", nil, CodeInvalidPrecision, 0},
		{"KES trailing zero beyond precision", "KES", "1.000", nil, CodeInvalidPrecision, 0},
		{"UGX whole", "UGX", "100", nil, "", 100},
		{"UGX decimal", "UGX", "100.5", nil, CodeInvalidPrecision, 0},
		{"UGX .0", "UGX", "100.0", nil, CodeInvalidPrecision, 0},
		{"RWF whole", "RWF", "2500", nil, "", 2500},

		{"zero", "KES", "0", nil, CodeNotPositive, 0},
		{"zero with decimals", "KES", "0.00", nil, CodeNotPositive, 0},
		{"JSON zero", "KES", raw("0"), nil, CodeNotPositive, 0},
		{"UGX zero", "UGX", "0", nil, CodeNotPositive, 0},

		{"negative", "KES", "-5", nil, CodeNotPositive, 0},
		{"JSON negative", "KES", raw("-5"), nil, CodeNotPositive, 0},
		{"negative, badly written", "KES", "-5,0", nil, CodeInvalidFormat, 0},
		{"plus sign", "KES", "+5", nil, CodeInvalidFormat, 0},
		{"exponent in text", "KES", "1e3", nil, CodeInvalidFormat, 0},
		// decisions.md §4 takes JSON numbers; Jackson writes a double of
		// ten million or more with an exponent.
		{"JSON exponent", "KES", raw("1e3"), nil, "", 100_000},
		{"JSON exponent as Jackson writes it", "KES", raw("1.0E7"), nil, "", 1_000_000_000},
		{"JSON negative exponent", "KES", raw("1.5e-1"), nil, "", 15},
		{"JSON exponent, too many places", "KES", raw("1.234E-1"), nil, CodeInvalidPrecision, 0},
		{"JSON exponent on UGX", "UGX", raw("2.5E5"), nil, "", 250_000},
		{"JSON exponent far out", "KES", raw("1e400"), nil, CodeTooLarge, 0},
		{"JSON exponent too far to write", "KES", raw("1e1001"), nil, CodeInvalidFormat, 0},
		{"JSON exponent, far too many places", "KES", raw("1e-400"), nil, CodeInvalidPrecision, 0},
		// Jackson and Python write a double below ten million as 1500.0:
		// a number's zeros are not places; the same as text still are.
		{"JSON number .0 on UGX", "UGX", raw("1500.0"), nil, "", 1500},
		{"JSON number .50 on KES", "KES", raw("1500.50"), nil, "", 150_050},
		{"JSON number .000 on KES", "KES", raw("1500.000"), nil, "", 150_000},
		{"JSON number, a place too many", "UGX", raw("1500.5"), nil, CodeInvalidPrecision, 0},
		{"JSON number zero", "KES", raw("0.00"), nil, CodeNotPositive, 0},
		{"thousands comma", "KES", "1,000", nil, CodeInvalidFormat, 0},
		{"thousands space", "KES", "1 000", nil, CodeInvalidFormat, 0},
		{"decimal comma", "KES", "1500,00", nil, CodeInvalidFormat, 0},
		{"leading dot", "KES", ".5", nil, CodeInvalidFormat, 0},
		{"trailing dot", "KES", "5.", nil, CodeInvalidFormat, 0},
		{"two dots", "KES", "1.2.3", nil, CodeInvalidFormat, 0},
		{"currency prefix", "KES", "KES 1500", nil, CodeInvalidFormat, 0},
		{"hex", "KES", "0x10", nil, CodeInvalidFormat, 0},
		{"NaN", "KES", "NaN", nil, CodeInvalidFormat, 0},
		{"Infinity", "KES", "Infinity", nil, CodeInvalidFormat, 0},
		{"full-width digits", "KES", "１５００", nil, CodeInvalidFormat, 0},
		{"words", "KES", "fifteen hundred", nil, CodeInvalidFormat, 0},

		{"exactly the maximum", "KES", "10000000", nil, "", 1_000_000_000},
		{"exactly the maximum with cents", "KES", "10000000.00", nil, "", 1_000_000_000},
		{"one cent above the maximum", "KES", "10000000.01", nil, CodeTooLarge, 0},
		{"one unit above the maximum", "KES", "10000001", nil, CodeTooLarge, 0},
		{"beyond int64 minor units", "KES", "99999999999999999999", nil, CodeTooLarge, 0},
		{"UGX exactly the maximum", "UGX", "10000000", nil, "", 10_000_000},
		{"UGX above the maximum", "UGX", "10000001", nil, CodeTooLarge, 0},
		{"configured maximum", "KES", "500", func(p *Policy) { p.MaxAmount = 500 }, "", 50000},
		{"above configured maximum", "KES", "500.01", func(p *Policy) { p.MaxAmount = 500 }, CodeTooLarge, 0},
		// A currency's own cap, and the others' unchanged.
		{"UGX within its own maximum", "UGX", "40000000000", func(p *Policy) { p.MaxAmountIn = map[string]int64{"UGX": 40_000_000_000} }, "", 40_000_000_000},
		{"UGX above its own maximum", "UGX", "40000000001", func(p *Policy) { p.MaxAmountIn = map[string]int64{"UGX": 40_000_000_000} }, CodeTooLarge, 0},
		{"KES beside a UGX maximum", "KES", "10000001", func(p *Policy) { p.MaxAmountIn = map[string]int64{"UGX": 40_000_000_000} }, CodeTooLarge, 0},
		{"USD below the others", "USD", "50001", func(p *Policy) { p.MaxAmountIn = map[string]int64{"USD": 50_000} }, CodeTooLarge, 0},

		{"JPY when the operator supports it", "JPY", "100", func(p *Policy) { p.Currencies = append(p.Currencies, "JPY") }, "", 100},
		{"JPY decimals", "JPY", "100.5", func(p *Policy) { p.Currencies = append(p.Currencies, "JPY") }, CodeInvalidPrecision, 0},
		{"three-digit currency", "BHD", "1.005", func(p *Policy) { p.Currencies = []string{"BHD"} }, "", 1005},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Currencies = slices.Clone(p.Currencies)
			if tt.policy != nil {
				tt.policy(&p)
			}
			b, err := validate(t, validBody().with("order.currency", tt.currency).with("order.amount", tt.amount), p)
			if tt.code != "" {
				wantOnly(t, err, "order.amount", tt.code)
				return
			}
			if err != nil {
				t.Fatalf("amount %#v %s refused: %v", tt.amount, tt.currency, err)
			}
			if b.Amount.Minor != tt.minor || b.Amount.Currency.Code != tt.currency {
				t.Errorf("amount %#v %s = %d %s, want %d %s", tt.amount, tt.currency,
					b.Amount.Minor, b.Amount.Currency.Code, tt.minor, tt.currency)
			}
		})
	}
}

func TestValidateCurrency(t *testing.T) {
	for _, code := range []string{"KES", "USD", "EUR", "GBP", "UGX", "TZS", "RWF"} {
		t.Run("default supports "+code, func(t *testing.T) {
			b, err := validate(t, validBody().with("order.currency", code).with("order.amount", "100"), DefaultPolicy())
			if err != nil {
				t.Fatalf("currency %s refused: %v", code, err)
			}
			if b.Amount.Currency.Code != code {
				t.Errorf("currency = %s, want %s", b.Amount.Currency.Code, code)
			}
		})
	}
	tests := []struct {
		name   string
		value  any
		policy Policy
		code   string
	}{
		{"trimmed", " KES ", DefaultPolicy(), ""},
		{"ISO but not supported by default", "JPY", DefaultPolicy(), CodeUnsupportedCurrency},
		{"unknown code", "XYZ", DefaultPolicy(), CodeUnsupportedCurrency},
		{"lower case", "kes", DefaultPolicy(), CodeUnsupportedCurrency},
		{"mixed case", "Kes", DefaultPolicy(), CodeUnsupportedCurrency},
		{"not ISO", "BTC", DefaultPolicy(), CodeUnsupportedCurrency},
		{"numeric code", raw("404"), DefaultPolicy(), CodeUnsupportedCurrency},
		{"symbol", "KSh", DefaultPolicy(), CodeUnsupportedCurrency},
		{"configured but not ISO", "XYZ", Policy{Currencies: []string{"KES", "XYZ"}, MaxAmount: 1000, TTL: time.Hour}, CodeUnsupportedCurrency},
		{"ISO but removed by the operator", "EUR", Policy{Currencies: []string{"KES"}, MaxAmount: 1000, TTL: time.Hour}, CodeUnsupportedCurrency},
		{"added by the operator", "JPY", Policy{Currencies: []string{"JPY"}, MaxAmount: 1000, TTL: time.Hour}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validate(t, validBody().with("order.currency", tt.value).with("order.amount", "100"), tt.policy)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("currency %#v refused: %v", tt.value, err)
				}
				return
			}
			wantOnly(t, err, "order.currency", tt.code)
		})
	}
}

func TestValidateChannel(t *testing.T) {
	runFieldCases(t, "order.channel", func(Bill) string { return "" }, []fieldCase{
		{"CARD", "CARD", "", ""},
		{"trimmed", " CARD ", "", ""},
		{"lower case", "card", CodeInvalidChannel, ""},
		{"title case", "Card", CodeInvalidChannel, ""},
		{"other channel", "MPESA", CodeInvalidChannel, ""},
		{"plural", "CARDS", CodeInvalidChannel, ""},
		{"number", raw("1"), CodeInvalidChannel, ""},
	})
}

func TestValidateBillerCode(t *testing.T) {
	runFieldCases(t, "order.billerCode", func(b Bill) string { return b.BillerCode }, []fieldCase{
		{"the merchant's", "700100", "", "700100"},
		{"trimmed", " 700100 ", "", "700100"},
		{"JSON number", raw("700100"), "", "700100"},
		{"another biller", "700101", CodeUnknownBiller, ""},
		{"leading zero added", "0700100", CodeUnknownBiller, ""},
		{"the merchant code instead", testMerchant.Code, CodeUnknownBiller, ""},
	})
}

func TestValidateOutlet(t *testing.T) {
	runFieldCases(t, "order.outlet", func(b Bill) string { return b.Outlet }, []fieldCase{
		{"first outlet", "80010001", "", "80010001"},
		{"second outlet", "80010002", "", "80010002"},
		{"trimmed", " 80010002 ", "", "80010002"},
		{"JSON number", raw("80010001"), "", "80010001"},
		{"another outlet", "80010003", CodeUnknownOutlet, ""},
		{"the biller code instead", testMerchant.BillerCode, CodeUnknownOutlet, ""},
	})
}

func TestPolicyCheck(t *testing.T) {
	if err := DefaultPolicy().Check(); err != nil {
		t.Fatalf("the default policy: %v", err)
	}
	for name, edit := range map[string]func(*Policy){
		"TTL beyond the cap": func(p *Policy) { p.TTL = 31 * 24 * time.Hour },
		"no TTL":             func(p *Policy) { p.TTL = 0 },
		"negative cap":       func(p *Policy) { p.MaxTTL = -time.Hour },
	} {
		p := DefaultPolicy()
		edit(&p)
		if err := p.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * 24 * time.Hour: "30 days", 24 * time.Hour: "1 day", 36 * time.Hour: "36h0m0s", time.Hour: "1h0m0s"} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestValidateExpiry(t *testing.T) {
	nairobi := time.FixedZone("EAT", 3*60*60)
	ttl := DefaultPolicy().TTL
	tests := []struct {
		name  string
		value any
		code  string
		want  time.Time
	}{
		{"absent: the policy's TTL", absent, "", testNow.Add(ttl)},
		{"null: the policy's TTL", raw("null"), "", testNow.Add(ttl)},
		{"empty: the policy's TTL", "", "", testNow.Add(ttl)},
		{"future with offset", "2026-03-16T18:00:00+03:00", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"future in UTC", "2026-03-15T10:30:00Z", "", testNow.Add(time.Hour)},
		{"fractional seconds", "2026-03-15T09:30:00.5Z", "", testNow.Add(500 * time.Millisecond)},
		{"beyond the default TTL", "2026-04-10T09:30:00Z", "", time.Date(2026, 4, 10, 9, 30, 0, 0, time.UTC)},
		{"exactly the longest allowed", testNow.Add(30 * 24 * time.Hour).Format(time.RFC3339), "", testNow.Add(30 * 24 * time.Hour)},
		{"no offset: the operator's zone", "2026-03-16T18:00:00", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"no offset, fractional seconds", "2026-03-16T18:00:00.250", "", time.Date(2026, 3, 16, 18, 0, 0, 250e6, nairobi)},
		{"trimmed", " 2026-03-15T10:30:00Z ", "", testNow.Add(time.Hour)},

		{"exactly now", testNow.Format(time.RFC3339), CodeInPast, time.Time{}},
		{"one second ago", testNow.Add(-time.Second).Format(time.RFC3339), CodeInPast, time.Time{}},
		{"years ago", "2020-01-01T00:00:00Z", CodeInPast, time.Time{}},
		{"offset applied: 11:30 EAT is 08:30 UTC", "2026-03-15T11:30:00+03:00", CodeInPast, time.Time{}},
		{"no offset, in the past in the operator's zone", "2026-03-15T12:00:00", CodeInPast, time.Time{}},
		{"a second past the longest allowed: capped", testNow.Add(30*24*time.Hour + time.Second).Format(time.RFC3339), "", testNow.Add(30 * 24 * time.Hour)},
		{"the spec's 2030, no offset: capped", "2030-01-17T00:00:00", "", testNow.Add(30 * 24 * time.Hour)},
		{"year 9999: capped", "9999-12-31T23:59:59Z", "", testNow.Add(30 * 24 * time.Hour)},

		{"words", "tomorrow", CodeInvalidFormat, time.Time{}},
		{"date only", "2026-03-16", CodeInvalidFormat, time.Time{}},
		{"no seconds", "2026-03-16T18:00", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"no seconds, in UTC", "2026-03-16T15:00Z", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"basic offset, as PHP's DATE_ISO8601 and Java's Z write it", "2026-03-16T18:00:00+0300", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"basic offset, milliseconds", "2026-03-16T15:00:00.000+0000", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"basic offset, no seconds", "2026-03-16T18:00+0300", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"the offset's hours alone", "2026-03-16T18:00:00+03", "", time.Date(2026, 3, 16, 18, 0, 0, 0, nairobi)},
		{"offset of the wrong size", "2026-03-16T18:00:00+030", CodeInvalidFormat, time.Time{}},
		{"hour only", "2026-03-16T18", CodeInvalidFormat, time.Time{}},
		{"offset out of range", "2026-03-16T18:00:00+2500", CodeInvalidFormat, time.Time{}},
		{"space for T", "2026-03-16 18:00:00", CodeInvalidFormat, time.Time{}},
		{"java default format", "Mon Mar 16 18:00:00 EAT 2026", CodeInvalidFormat, time.Time{}},
		{"unix seconds as a number", raw("1773680000"), CodeInvalidFormat, time.Time{}},
		{"boolean", raw("true"), CodeInvalidType, time.Time{}},
		{"object", raw(`{"at":"2026-03-16T18:00:00Z"}`), CodeInvalidType, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Location = nairobi
			b, err := validate(t, validBody().with("order.expiry", tt.value), p)
			if tt.code != "" {
				wantOnly(t, err, "order.expiry", tt.code)
				return
			}
			if err != nil {
				t.Fatalf("expiry %#v refused: %v", tt.value, err)
			}
			if !b.ExpiresAt.Equal(tt.want) {
				t.Errorf("ExpiresAt = %v, want %v", b.ExpiresAt, tt.want)
			}
		})
	}

	t.Run("configured TTL", func(t *testing.T) {
		p := DefaultPolicy()
		p.TTL = 2 * time.Hour
		b, err := validate(t, validBody(), p)
		if err != nil {
			t.Fatal(err)
		}
		if want := testNow.Add(2 * time.Hour); !b.ExpiresAt.Equal(want) {
			t.Errorf("ExpiresAt = %v, want %v", b.ExpiresAt, want)
		}
	})
}

// requiredFields are the spec's mandatory fields.
var requiredFields = []string{
	"customer.name", "order.billerCode", "order.reference", "order.amount",
	"order.currency", "order.description", "order.channel", "order.outlet",
}

func TestValidateRequired(t *testing.T) {
	for _, field := range requiredFields {
		for _, v := range []struct {
			name  string
			value any
		}{
			{"absent", absent},
			{"null", raw("null")},
			{"empty", ""},
			{"spaces only", "   "},
		} {
			t.Run(field+"/"+v.name, func(t *testing.T) {
				_, err := validate(t, validBody().with(field, v.value), DefaultPolicy())
				wantOnly(t, err, field, CodeRequired)
			})
		}
	}
	t.Run("empty object reports every required field", func(t *testing.T) {
		req, err := DecodeRequest([]byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Validate(req, testMerchant, DefaultPolicy(), testNow)
		var got []string
		for _, f := range fieldErrors(t, err) {
			if f.Code != CodeRequired {
				t.Errorf("%s: code %s, want %s", f.Field, f.Code, CodeRequired)
			}
			got = append(got, f.Field)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(requiredFields))
		if !slices.Equal(got, want) {
			t.Errorf("required fields reported = %v, want %v", got, want)
		}
	})
}

func TestValidateWrongType(t *testing.T) {
	for _, field := range requiredFields {
		for _, v := range []raw{"{}", `{"value":"x"}`, "[]", `["x"]`, "true", "false"} {
			t.Run(field+"/"+string(v), func(t *testing.T) {
				_, err := validate(t, validBody().with(field, v), DefaultPolicy())
				wantOnly(t, err, field, CodeInvalidType)
				// The amount takes a number too: its message says so.
				var ve *ValidationError
				if errors.As(err, &ve) && field == "order.amount" && !strings.Contains(ve.Fields[0].Message, "JSON number") {
					t.Errorf("an amount of the wrong type: %q does not say a number is taken", ve.Fields[0].Message)
				}
			})
		}
	}
}

func TestValidateReportsEveryViolation(t *testing.T) {
	b := validBody().
		with("customer.name", "<script>").
		with("order.reference", "ORD-1001").
		with("order.description", absent).
		with("order.amount", "0").
		with("order.channel", "MPESA").
		with("order.outlet", "99999999")
	_, err := validate(t, b, DefaultPolicy())
	if err == nil {
		t.Fatal("accepted a request breaking six rules")
	}
	got := fieldErrors(t, err)
	want := []FieldError{
		{Field: "customer.name", Code: CodeInvalidCharacters},
		{Field: "order.reference", Code: CodeInvalidCharacters},
		{Field: "order.description", Code: CodeRequired},
		{Field: "order.amount", Code: CodeNotPositive},
		{Field: "order.channel", Code: CodeInvalidChannel},
		{Field: "order.outlet", Code: CodeUnknownOutlet},
	}
	key := func(f FieldError) string { return f.Field + " " + f.Code }
	gotKeys := make([]string, len(got))
	for i, f := range got {
		gotKeys[i] = key(f)
	}
	wantKeys := make([]string, len(want))
	for i, f := range want {
		wantKeys[i] = key(f)
	}
	slices.Sort(gotKeys)
	slices.Sort(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Fatalf("errors = %v\nwant     %v", gotKeys, wantKeys)
	}
	msg := err.Error()
	for _, f := range want {
		if !strings.Contains(msg, f.Field) {
			t.Errorf("Error() = %q does not name %s", msg, f.Field)
		}
	}
}

// A name and a length can both be wrong; both are reported.
func TestValidateReportsTwoRulesOfOneField(t *testing.T) {
	_, err := validate(t, validBody().with("order.reference", strings.Repeat("é", 21)), DefaultPolicy())
	got := fieldErrors(t, err)
	if pairs(got) != "[order.reference too_long, order.reference invalid_characters]" {
		t.Errorf("errors = %s, want too_long and invalid_characters on order.reference", pairs(got))
	}
}

func TestValidateResult(t *testing.T) {
	b, err := validate(t, validBody().with("customer.name", " Zoë Wanjiru ").with("order.expiry", "2026-03-16T18:00:00+03:00"), DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	want := Bill{
		MerchantCode:   testMerchant.Code,
		OrderReference: "ORD1001",
		CustomerName:   "Zoë Wanjiru",
		BillerCode:     "700100",
		Outlet:         "80010001",
		Description:    "Order #1001 (2 items): shoes, socks / size 42.",
	}
	got := b
	got.Amount, got.ExpiresAt, got.RequestHash, got.requestedExpiry, got.requestedExpiryText = want.Amount, want.ExpiresAt, "", time.Time{}, ""
	if got != want {
		t.Errorf("Validate = %+v\nwant       %+v", got, want)
	}
	if b.Amount.Minor != 150000 || b.Amount.Currency.Code != "KES" || b.Amount.String() != "1500.00" {
		t.Errorf("Amount = %d %s (%s), want 150000 KES (1500.00)", b.Amount.Minor, b.Amount.Currency.Code, b.Amount)
	}
	if b.ExpiresAt.UTC() != time.Date(2026, 3, 16, 15, 0, 0, 0, time.UTC) {
		t.Errorf("ExpiresAt = %v, want 2026-03-16T15:00:00Z", b.ExpiresAt)
	}
	if len(b.RequestHash) != 64 {
		t.Errorf("RequestHash = %q, want a hex SHA-256", b.RequestHash)
	}
	// Reference, state and timestamps belong to the service, not the rules.
	if b.Reference != "" || b.State != "" || !b.CreatedAt.IsZero() {
		t.Errorf("Validate set service fields: %+v", b)
	}
}

func TestRequestHash(t *testing.T) {
	base := validBody().with("order.amount", "1500")
	hashOf := func(t *testing.T, b body) string {
		t.Helper()
		out, err := validate(t, b, DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		return out.RequestHash
	}
	baseHash := hashOf(t, base)
	tests := []struct {
		name string
		b    body
		same bool
	}{
		{"1500.00 is 1500", base.with("order.amount", "1500.00"), true},
		{"1500.0 is 1500", base.with("order.amount", "1500.0"), true},
		{"JSON number 1500 is 1500", base.with("order.amount", raw("1500")), true},
		{"spaces trimmed from the name", base.with("customer.name", "  Zoë Wanjiru-O'Neil "), true},
		{"unknown fields do not count", base.with("customer.customerid", "C-17"), true},
		{"channel trimmed", base.with("order.channel", " CARD"), true},

		{"different amount", base.with("order.amount", "1500.01"), false},
		{"same number in another currency", base.with("order.currency", "USD"), false},
		{"different name", base.with("customer.name", "Zoe Wanjiru-O'Neil"), false},
		{"different reference", base.with("order.reference", "ORD1002"), false},
		{"different description", base.with("order.description", "Order 1001"), false},
		{"other outlet", base.with("order.outlet", "80010002"), false},
		{"explicit expiry", base.with("order.expiry", "2026-03-16T18:00:00Z"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hashOf(t, tt.b); (got == baseHash) != tt.same {
				t.Errorf("hash equal to the base request's = %v, want %v", got == baseHash, tt.same)
			}
		})
	}

	// One instant, written in two offsets, is one request: a client that
	// formats its expiry in UTC on one try and in local time on the next
	// was told 409. Another instant, or another field, is another request.
	stored, err := validate(t, base.with("order.expiry", "2026-03-16T15:00:00Z"), DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	stored.CreatedAt = testNow // as the service stores it
	for _, tc := range []struct {
		b    body
		same bool
	}{
		{base.with("order.expiry", "2026-03-16T18:00:00+03:00"), true},
		{base.with("order.expiry", "2026-03-16T15:00:00.000Z"), true},
		{base.with("order.expiry", " 2026-03-16T15:00:00Z "), true},
		{base.with("order.expiry", "2026-03-16T15:00:01Z"), false},
		{base.with("order.expiry", "2026-03-16T15:00:00.001+00:00"), false},
		{base.with("order.expiry", "2026-03-16T18:00:00+03:00").with("order.amount", "1500.01"), false},
		{base.with("order.expiry", "2026-03-16T18:00:00+03:00").with("customer.name", "Zoe"), false},
		{base, false},
	} {
		b, err := validate(t, tc.b, DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		if got := b.sameRequest(stored, DefaultPolicy().MaxTTL); got != tc.same {
			t.Errorf("%s: same request as 15:00:00Z = %v, want %v", tc.b, got, tc.same)
		}
	}

	// An expiry past the longest a bill stays open is capped: the stored
	// bill keeps the cap, not the instant asked. Retried in another offset,
	// or retried later (the cap then moved on), any expiry that was capped
	// when the bill was made is the same request; one within the cap, or
	// a bill that was not capped, is not.
	far := base.with("order.expiry", "2030-01-17T00:00:00+03:00")
	capped, err := validate(t, far, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	capped.CreatedAt = testNow
	if !capped.ExpiresAt.Equal(testNow.Add(DefaultPolicy().MaxTTL)) {
		t.Fatalf("%s was not capped: expires %v", far, capped.ExpiresAt)
	}
	withinCap := testNow.Add(DefaultPolicy().MaxTTL - time.Hour).Format(time.RFC3339)
	later := func(b body) Bill {
		req, err := DecodeRequest(b.bytes(t))
		if err != nil {
			t.Fatal(err)
		}
		v, err := Validate(req, testMerchant, DefaultPolicy(), testNow.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		b    Bill
		same bool
	}{
		{"the same instant in UTC", mustValidate(t, base.with("order.expiry", "2030-01-16T21:00:00Z")), true},
		{"the same instant with no offset", mustValidate(t, base.with("order.expiry", "2030-01-17T00:00:00")), true},
		{"the same text an hour later", later(far), true},
		{"another far-off instant", mustValidate(t, base.with("order.expiry", "2031-06-01T00:00:00Z")), true},
		{"an expiry within the cap", mustValidate(t, base.with("order.expiry", withinCap)), false},
		{"no expiry", mustValidate(t, base), false},
		{"another amount", mustValidate(t, far.with("order.amount", "1500.01")), false},
	} {
		if got := tc.b.sameRequest(capped, DefaultPolicy().MaxTTL); got != tc.same {
			t.Errorf("%s: same request as a capped bill = %v, want %v", tc.name, got, tc.same)
		}
	}
	// A bill that was not capped is not taken for one: an expiry past its
	// own asks for another bill.
	uncapped := mustValidate(t, base.with("order.expiry", withinCap))
	uncapped.CreatedAt = testNow
	if mustValidate(t, far).sameRequest(uncapped, DefaultPolicy().MaxTTL) {
		t.Error("a far-off expiry is the same request as a bill within the cap")
	}
	// Nor is a bill made within a longer cap (another node's, or before
	// --bill-max-ttl was lowered) that outlasts this node's.
	tenDays := mustValidate(t, base.with("order.expiry", testNow.Add(10*24*time.Hour).Format(time.RFC3339)))
	tenDays.CreatedAt = testNow
	if mustValidate(t, base.with("order.expiry", testNow.Add(20*24*time.Hour).Format(time.RFC3339))).sameRequest(tenDays, 7*24*time.Hour) {
		t.Error("another expiry is the same request as an uncapped bill past this node's cap")
	}
}

func mustValidate(t *testing.T, b body) Bill {
	t.Helper()
	v, err := validate(t, b, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The stored hash is of the expiry's text, as the release before stores
// it: a node of either release, side by side during a rolling upgrade or
// after going back, judges an identical retry the same.
func TestStoredHashIsTheTextsAsBefore(t *testing.T) {
	const expiry = "2026-03-16T18:00:00+03:00"
	b, err := validate(t, validBody().with("order.expiry", expiry), DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if b.RequestHash != requestHash(b, expiry) {
		t.Fatal("the stored hash is not of the expiry's text")
	}
}

func TestBillExpired(t *testing.T) {
	b := Bill{ExpiresAt: testNow}
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{testNow.Add(-time.Millisecond), false},
		{testNow, true},
		{testNow.Add(time.Millisecond), true},
	} {
		if got := b.Expired(tt.at); got != tt.want {
			t.Errorf("Expired(%v) with ExpiresAt %v = %v, want %v", tt.at, b.ExpiresAt, got, tt.want)
		}
	}
}

// Names and descriptions in Indic scripts need spacing vowel signs
// (category Mc), which are as much part of a "Unicode letter" as the
// combining marks (Mn) the rules already accept.
func TestValidateAcceptsSpacingMarks(t *testing.T) {
	for _, tt := range []struct{ field, value string }{
		{"customer.name", "प्रिया शर्मा"}, // Priya Sharma
		{"customer.name", "முருகன்"},      // Murugan
		{"order.description", "किताबें (2)"},
	} {
		t.Run(tt.value, func(t *testing.T) {
			if _, err := validate(t, validBody().with(tt.field, tt.value), DefaultPolicy()); err != nil {
				t.Errorf("%s %q refused: %v", tt.field, tt.value, err)
			}
		})
	}
}

// Decisions §4: "control characters are never accepted anywhere", trimming
// is for spaces.
func TestValidateRefusesControlCharactersAtTheEdges(t *testing.T) {
	for _, field := range []string{"customer.name", "order.reference", "order.description"} {
		for _, v := range []string{"ORD1\n", "\tORD1", "ORD1\r\n", "ORD1\u0085", "\vORD1"} {
			t.Run(fmt.Sprintf("%s/%q", field, v), func(t *testing.T) {
				_, err := validate(t, validBody().with(field, v), DefaultPolicy())
				wantOnly(t, err, field, CodeInvalidCharacters)
			})
		}
	}
}

// Whether an amount is decimal text and above zero does not depend on the
// currency, so a bad currency must not hide a bad amount (docs/api.md:
// every violated rule at once).
func TestValidateReportsAmountFormatDespiteBadCurrency(t *testing.T) {
	_, err := validate(t, validBody().with("order.currency", "JPY").with("order.amount", "abc"), DefaultPolicy())
	got := fieldErrors(t, err)
	if pairs(got) != "[order.currency unsupported_currency, order.amount invalid_format]" {
		t.Errorf("errors = %s, want both the currency and the amount", pairs(got))
	}
}

func BenchmarkValidate(b *testing.B) {
	raw := validBody().with("customer.customerid", "C-17").with("order.expiry", "2026-03-16T18:00:00+03:00").bytes(b)
	p := DefaultPolicy()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := DecodeRequest(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Validate(req, testMerchant, p, testNow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateBaseline is the floor BenchmarkValidate is read against:
// decoding the same body into a generic map, which any JSON endpoint pays.
func BenchmarkValidateBaseline(b *testing.B) {
	raw := validBody().with("customer.customerid", "C-17").with("order.expiry", "2026-03-16T18:00:00+03:00").bytes(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// A request's hash is stored with its bill and compared by every node,
// the release before included: its value must never change.
func TestRequestHashIsStable(t *testing.T) {
	amount, err := money.FromMinor(150000, "KES")
	if err != nil {
		t.Fatal(err)
	}
	b := Bill{CustomerName: "Jane Doe", OrderReference: "ORDER-1", Description: "Two tickets", BillerCode: "B1", Outlet: "O1", Amount: amount}
	const want = "7cf70603e2c1ed33771445ad0dc7f91a35fee741eb69845f9e1c4ed822b41711"
	if got := requestHash(b, "2026-12-01T10:00:00+03:00"); got != want {
		t.Errorf("requestHash = %s, want %s", got, want)
	}
}

// A refused character is named, and where it is: a typographic ’ or –
// looks like the ' or - allowed.
func TestInvalidCharacterIsNamed(t *testing.T) {
	req := Request{}
	req.Customer.Name = Text{Value: "Men’s Shop", Present: true}
	_, err := Validate(req, merchant.Merchant{Code: "1"}, Policy{Currencies: []string{"KES"}, MaxAmount: 1000, TTL: time.Hour, MaxTTL: time.Hour}, time.Now())
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("Validate: %v", err)
	}
	for _, f := range v.Fields {
		if f.Field == "customer.name" {
			if want := `(character 4 is '\u2019')`; !strings.HasSuffix(f.Message, want) {
				t.Errorf("message %q, want it to end %s", f.Message, want)
			}
			return
		}
	}
	t.Errorf("customer.name not refused: %v", v.Fields)
}

// A customer or order that is not an object is one error, said once for
// the object, beside the other objects' errors.
func TestObjectOfAnotherType(t *testing.T) {
	var req Request
	if err := json.Unmarshal([]byte(`{"customer":"Jane","order":{"currency":"XYZ"}}`), &req); err != nil {
		t.Fatal(err)
	}
	_, err := Validate(req, testMerchant, DefaultPolicy(), testNow)
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("Validate: %v", err)
	}
	var customer []FieldError
	currency := false
	for _, f := range v.Fields {
		if strings.HasPrefix(f.Field, "customer") {
			customer = append(customer, f)
		}
		currency = currency || f.Field == "order.currency"
	}
	if len(customer) != 1 || customer[0] != (FieldError{Field: "customer", Code: CodeInvalidType, Message: "must be an object"}) || !currency {
		t.Errorf("errors %+v", v.Fields)
	}
}

// Text is judged as composed (NFC): a name sent with "ë" as one character,
// then retried as "e" and a combining diaeresis (another library, or a
// macOS keyboard), is the same request. It was 409.
func TestRetryJudgesTextAsComposed(t *testing.T) {
	const composed, decomposed = "Zoë Wanjiru-O'Neil", "Zoe\u0308 Wanjiru-O'Neil"
	for _, tc := range []struct {
		name          string
		stored, retry body
		same          bool
	}{
		{"composed, then decomposed", validBody().with("customer.name", composed), validBody().with("customer.name", decomposed), true},
		{"decomposed, then composed", validBody().with("customer.name", decomposed), validBody().with("customer.name", composed), true},
		{"in the description", validBody().with("order.description", "Café"), validBody().with("order.description", "Cafe\u0301"), true},
		{"with the same expiry", validBody().with("customer.name", composed).with("order.expiry", "2026-03-16T18:00:00+03:00"),
			validBody().with("customer.name", decomposed).with("order.expiry", "2026-03-16T18:00:00+03:00"), true},
		{"with the expiry's instant in another offset", validBody().with("customer.name", composed).with("order.expiry", "2026-03-16T18:00:00+03:00"),
			validBody().with("customer.name", decomposed).with("order.expiry", "2026-03-16T15:00:00Z"), true},
		{"another letter", validBody().with("customer.name", composed), validBody().with("customer.name", "Zoe Wanjiru-O'Neil"), false},
		{"an expiry the first had not", validBody().with("customer.name", composed),
			validBody().with("customer.name", decomposed).with("order.expiry", "2026-03-16T18:00:00+03:00"), false},
		{"without the first's expiry", validBody().with("customer.name", composed).with("order.expiry", "2026-03-16T18:00:00+03:00"),
			validBody().with("customer.name", decomposed), false},
	} {
		stored, retry := mustValidate(t, tc.stored), mustValidate(t, tc.retry)
		stored.CreatedAt = testNow
		if got := retry.sameRequest(stored, DefaultPolicy().MaxTTL); got != tc.same {
			t.Errorf("%s: same request = %v, want %v", tc.name, got, tc.same)
		}
	}
}
