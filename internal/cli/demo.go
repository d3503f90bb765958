package cli

import (
	"context"
	"errors"
	"io"
)

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("demo: not built yet")
}
