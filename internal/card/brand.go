package card

import "slices"

// Brand is a card scheme, named as the acquirer API spells it.
type Brand string

// The schemes we accept. Every constant is typed so a Brand can never be
// confused with an arbitrary string at a call site.
const (
	Visa       Brand = "VISA"
	Mastercard Brand = "MASTERCARD"
	Amex       Brand = "AMEX"
	Discover   Brand = "DISCOVER"
	JCB        Brand = "JCB"
	DinersClub Brand = "DINERS"
	UnionPay   Brand = "UNIONPAY"
)

// brandRule is one issuer identification number (IIN) range of a scheme,
// compared on the first len(low) digits, with the card lengths it issues.
type brandRule struct {
	brand     Brand
	low, high string
	lengths   []int
}

var (
	sixteenToNineteen  = []int{16, 17, 18, 19}
	fourteenToNineteen = []int{14, 15, 16, 17, 18, 19}
)

// brandRules lists the ranges we route. The ranges do not overlap, so order
// does not matter; a number matching none is a scheme we cannot acquire.
var brandRules = []brandRule{
	{Visa, "4", "4", []int{13, 16, 19}},
	{Mastercard, "51", "55", []int{16}},
	{Mastercard, "2221", "2720", []int{16}},
	{Amex, "34", "34", []int{15}},
	{Amex, "37", "37", []int{15}},
	{Discover, "6011", "6011", sixteenToNineteen},
	{Discover, "644", "649", sixteenToNineteen},
	{Discover, "65", "65", sixteenToNineteen},
	{JCB, "3528", "3589", sixteenToNineteen},
	{DinersClub, "300", "305", fourteenToNineteen},
	{DinersClub, "36", "36", fourteenToNineteen},
	{DinersClub, "38", "39", fourteenToNineteen},
	{UnionPay, "62", "62", sixteenToNineteen},
}

// unroutedRules are schemes we do not route whose numbers are card numbers
// all the same, for finding one in text (HoldsPAN, the redactors): a
// Maestro, Mir or Verve card typed into a shop's field was kept in clear.
// Their IIN ranges overlap none of brandRules' (Verve's 650002–650027 is
// within Discover's 65, found already).
var unroutedRules = []brandRule{
	{"MAESTRO", "5018", "5018", thirteenToNineteen},
	{"MAESTRO", "5020", "5020", thirteenToNineteen},
	{"MAESTRO", "5038", "5038", thirteenToNineteen},
	{"MAESTRO", "5893", "5893", thirteenToNineteen},
	{"MAESTRO", "6304", "6304", thirteenToNineteen},
	{"MAESTRO", "6759", "6759", thirteenToNineteen},
	{"MAESTRO", "6761", "6763", thirteenToNineteen},
	{"MIR", "2200", "2204", sixteenToNineteen},
	{"VERVE", "506099", "506198", []int{16, 18, 19}},
}

var thirteenToNineteen = []int{13, 14, 15, 16, 17, 18, 19}

// isCardNumber reports whether digits are a card number of a scheme we
// know, routed or not.
func isCardNumber(digits string) bool {
	return brandOf(digits) != "" || matchRule(unroutedRules, digits) != ""
}

// brandOf returns the scheme for a string of digits, or "" when no range
// and length fits.
func brandOf(digits string) Brand { return matchRule(brandRules, digits) }

func matchRule(rules []brandRule, digits string) Brand {
	for _, r := range rules {
		if !slices.Contains(r.lengths, len(digits)) {
			continue
		}
		// Equal-length strings of digits compare like the numbers they spell.
		prefix := digits[:len(r.low)]
		if prefix >= r.low && prefix <= r.high {
			return r.brand
		}
	}
	return ""
}

// Name is how card holders know the scheme ("" for an unknown one).
func (b Brand) Name() string {
	switch b {
	case Visa:
		return "Visa"
	case Mastercard:
		return "Mastercard"
	case Amex:
		return "American Express"
	case Discover:
		return "Discover"
	case JCB:
		return "JCB"
	case DinersClub:
		return "Diners Club"
	case UnionPay:
		return "UnionPay"
	}
	return ""
}
