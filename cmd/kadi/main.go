// Command kadi is the Kadi payment gateway. See internal/cli.
package main

import (
	"os"

	"github.com/kadipay/kadi/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
