package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
	var level, shopAddr string
	fs := newFlags("demo", stderr)
	serveFlags(fs, &cfg, &st, &level)
	fs.StringVar(&shopAddr, "shop-addr", "127.0.0.1:8081", "listen address of the demo shop")
	st.dataDir = ""
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if st.dataDir == "kadi-data" || st.dataDir == "" {
		dir, err := os.MkdirTemp("", "kadi-demo-")
		if err != nil {
			return err
		}
		st.dataDir = dir
	}
	cfg.DataDir, cfg.DatabaseURL, cfg.AllowPrivateIPN = st.dataDir, st.databaseURL, true
	log, err := newLogger(stderr, level)
	if err != nil {
		return usageErr(fs, err)
	}
	gwLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("gateway listen: %w", err)
	}
	shopLn, err := net.Listen("tcp", shopAddr)
	if err != nil {
		gwLn.Close()
		return fmt.Errorf("shop listen: %w", err)
	}
	gatewayURL, shopURL := "http://"+gwLn.Addr().String(), "http://"+shopLn.Addr().String()
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
	err = g.Store.SetIPN(ctx, creds.MerchantCode, merchant.Test, merchant.IPNConfig{URL: shopURL + demo.IPNPath, Username: ipnUser, Password: ipnPassword})
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

	fmt.Fprintf(stdout, `Kadi demo is running (test mode; no real money moves).

  Demo shop      %s   ← open this in a browser and buy something
  Gateway API    %s
  Hosted form    %s/cardPay
  Data dir       %s

Sandbox merchant (test mode):
  merchant code / username  %s
  password                  %s
  test API key              %s
  biller code               %s
  outlet code               %s
  test IPN URL              %s%s

Test card: %s, any future expiry, any 3-digit CVV.
Press Ctrl-C to stop.
`, shopURL, gatewayURL, gatewayURL, st.dataDir, creds.MerchantCode, creds.Password, creds.Test.APIKey, creds.BillerCode, creds.OutletCode, shopURL, demo.IPNPath, sim.TestCards[0].Grouped())
	err = g.Serve(ctx, gwLn)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
