// Package client is the merchant's side of a Kadi card payment, written
// against the standard library only so that it adds nothing to a merchant's
// dependency graph.
//
// A checkout takes four steps:
//
//  1. [New] builds a [Client] from the credentials given at onboarding. The
//     client fetches and caches its access token by itself. The hosted
//     form's token field takes [Client.PaymentToken], which can only pay:
//     the form is in the customer's browser, and the access token would let
//     anyone who reads the page create bills and read every payment.
//  2. [Client.CreateBill] registers the order and returns the [Bill] whose
//     reference and amount the form must carry.
//  3. [Client.RenderPaymentForm] writes the HTML form that sends the
//     customer's browser to the hosted card page. Leave [PaymentForm.Card]
//     nil: the gateway then collects the card data itself and the merchant's
//     systems never see a card number.
//  4. The gateway sends the browser back to the callback URL, where
//     [ParseCallback] reads the result.
//
// # The callback is not proof of payment
//
// The callback arrives through the customer's browser, unauthenticated. Anyone
// can post "Transaction Successfull" to a callback URL, so a [Callback] only
// says which bill to look at. Before giving value (shipping goods, crediting
// an account) call [Client.Verify] from the backend and check both
// [Verification.Paid] and the amount against the order.
//
// The callback POST is cross-site: exempt the callback route from CSRF
// protection and do not rely on the merchant's own session cookie there
// (browsers do not send SameSite=Lax or Strict cookies with a cross-site
// POST); find the order by its reference instead.
//
// # Instant payment notifications
//
// Independently of the browser, the gateway POSTs a signed notification to
// the IPN URL configured for the merchant and mode after every successful
// payment, retrying for about three days until it gets a 2xx. Unlike the
// callback it is authenticated: [NewIPNHandler] checks the Basic credentials
// and the Standard Webhooks signature (made with the mode's notification
// secret, and timestamped within [DefaultIPNTolerance], by default, of the
// receiver's clock) before handing the merchant's function a [Notification], and
// answers 2xx only if that function returns nil. A notification can arrive
// more than once: record it idempotently, by [Notification.ID] or the bill
// number.
//
// The gateway keeps a delivery log of every notification and each request it
// made to the receiver: [Client.Deliveries] lists it (the failed ones, or one
// payment's, page by page), [Client.Delivery] shows one with its attempts,
// and [Client.Redeliver] sends one again once the receiver is fixed. The log
// takes the API key itself, never a token.
//
// # Errors
//
// Every refusal by the gateway is an [*APIError] carrying the HTTP status,
// the gateway's code and message, the request id to quote to support, and for
// a rejected bill the [FieldError] of every violated rule. [ErrNotFound],
// [ErrUnauthorized] and [ErrRateLimited] match such errors with [errors.Is].
package client
