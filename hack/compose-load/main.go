// compose-load loads Compose files with compose-go, the loader docker compose itself uses:
// the Compose specification schema, then the project's consistency (every depends_on names a
// service, every named volume is declared, ...). It prints one line per file and exits 1 on the
// first file that does not load. hack/compose-validate.sh builds and runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	for _, f := range os.Args[1:] {
		if err := load(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
	}
}

func load(f string) error {
	abs, err := filepath.Abs(f)
	if err != nil {
		return err
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)), cli.WithName("kstack-check"))
	if err != nil {
		return err
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		return err
	}
	fmt.Printf("%s: loaded by compose-go (%d services)\n", f, len(p.ServiceNames()))
	return nil
}
