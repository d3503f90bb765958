package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/demo"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
)

// demo runs the gateway on a sandbox data dir with a ready merchant, and a
// demo shop beside it, and prints where everything is.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := server.Defaults()
	var st storeFlags
	var logs logFlags
	var shopAddr string
	fs := newFlags("demo", stderr)
	serveFlags(fs, &cfg, &st, &logs)
	fs.StringVar(&shopAddr, "shop-addr", "127.0.0.1:8081", "listen address of the demo shop")
	st.dataDir = ""
	if f := fs.Lookup("data-dir"); f != nil {
		f.DefValue, f.Usage = "", "directory to keep the demo's data in (default: a temporary one, removed when the demo stops)"
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkMaxAmounts(cfg.Bills); err != nil {
		return usageErr(fs, err)
	}
	if cfg.FormAddr != "" || cfg.DashboardAddr != "" || cfg.FormPublicURL != "" {
		// The demo's shop, links and printout assume one listener.
		return usageErr(fs, errors.New("the demo serves the hosted form and the dashboard on --addr; --form-addr, --form-public-url and --dashboard-addr are for kadi serve"))
	}
	for _, a := range []struct{ flag, addr string }{{"--addr", cfg.Addr}, {"--shop-addr", shopAddr}, {"--metrics-addr", cfg.MetricsAddr}} {
		if err := checkListenAddr(a.flag, a.addr); err != nil {
			return usageErr(fs, err)
		}
	}
	dataDirGiven := st.dataDir != "" // any, the usual kadi-data included
	if !dataDirGiven {
		dir, err := os.MkdirTemp("", "kadi-demo-")
		if err != nil {
			return err
		}
		// A demo leaves nothing behind unless asked to keep its data.
		defer os.RemoveAll(dir)
		st.dataDir = dir
	}
	cfg.DataDir, cfg.DatabaseURL, cfg.AllowPrivateIPN = st.dataDir, st.databaseURL, true
	log, err := newLogger(stderr, logs)
	if err != nil {
		return usageErr(fs, err)
	}
	release, held, err := lockDataDir(cfg, log)
	if err != nil {
		return err
	}
	cfg.DataDirHeld = held
	defer release()
	gwLn, err := listen(cfg.Addr, "the gateway", "--addr")
	if err != nil {
		return err
	}
	shopLn, err := listen(shopAddr, "the demo shop", "--shop-addr")
	if err != nil {
		gwLn.Close()
		return err
	}
	gatewayURL, _ := localURL(gwLn)
	shopURL, _ := localURL(shopLn)
	if cfg.PublicURL == "" {
		cfg.PublicURL = gatewayURL
	}
	g, err := server.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer g.Close()
	creds, err := merchant.Onboard(ctx, g.Store, "Kadi Demo Coffee", time.Now())
	if err != nil {
		return err
	}
	c, err := client.New(client.Config{BaseURL: cfg.PublicURL, APIKey: creds.Test.APIKey, Username: creds.Username, Password: creds.Password})
	if err != nil {
		return err
	}
	ipnUser, ipnPassword := "demo-shop", secret.NewPassword()
	_, err = g.Store.SetIPN(ctx, creds.MerchantCode, merchant.Test, merchant.IPNConfig{URL: shopURL + demo.IPNPath, Username: ipnUser, Password: ipnPassword})
	if err != nil {
		return err
	}
	shop := &demo.Shop{Client: c, Credentials: creds, ShopURL: shopURL, Log: log,
		IPN: &client.IPNConfig{Secret: creds.Test.NotificationSecret, Username: ipnUser, Password: ipnPassword}}
	shopHandler, err := shop.Handler()
	if err != nil {
		return err
	}
	shopSrv := &http.Server{Handler: shopHandler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = shopSrv.Serve(shopLn) }()
	defer shopSrv.Close()

	keep := " (removed when the demo stops; pass --data-dir to keep it)"
	if dataDirGiven {
		keep = ""
	}
	fmt.Fprintf(stdout, `Kadi demo is running (test mode; no real money moves).

  Demo shop      %s   ← open this in a browser and buy something
  Gateway API    %s   (reference: %s/docs)
  Dashboard      %s/dashboard/   ← sign in with the merchant code and password below
  Hosted form    POST %s/cardPay (the shop's checkout sends you there)
  Data dir       %s%s

Sandbox merchant (test mode):
  merchant code / username  %s
  password                  %s
  test API key              %s
  biller code               %s
  outlet code               %s
  test IPN URL              %s%s

Test card: %s, any future expiry, any 3-digit CVV.
Press Ctrl-C to stop.
`, shopURL, gatewayURL, gatewayURL, gatewayURL, gatewayURL, st.dataDir, keep, creds.MerchantCode, creds.Password, creds.Test.APIKey, creds.BillerCode, creds.OutletCode, shopURL, demo.IPNPath, sim.TestCards[0].Grouped())
	err = g.Serve(ctx, gwLn)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// listen opens addr for what, and says which flag moves it when the port
// is taken: the commonest first-run failure.
func listen(addr, what, flagName string) (net.Listener, error) {
	ln, err := server.Listen(addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s cannot listen on %s: the port is in use; pass %s with a free address (port 0 picks one)", what, addr, flagName)
	} else if err != nil {
		return nil, fmt.Errorf("%s cannot listen on %s: %w", what, addr, err)
	}
	return ln, nil
}
