module github.com/kadipay/kadi

go 1.26.8
