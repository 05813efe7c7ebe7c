// Command build builds the e2e images (e2e/images) into <repo>/.cache/images
// and prints, for each, its name and archive:
//
//	go run ./e2e/images/build [-only agent|mariadb]
//
// then load an archive with: ctr -n k8s.io images import <archive>.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/mysqlha/mysqlha/e2e/images"
)

func main() {
	only := flag.String("only", "", "build only this image: agent or mariadb")
	verbose := flag.Bool("v", false, "log progress to stderr")
	flag.Parse()
	if err := run(*only, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func run(only string, verbose bool) error {
	if only != "" && only != "agent" && only != "mariadb" {
		return fmt.Errorf("-only %q: want agent or mariadb", only)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := images.DefaultCache()
	if err != nil {
		return err
	}
	if verbose {
		c.Logf = log.New(os.Stderr, "", log.LstdFlags).Printf
	}
	if only != "mariadb" {
		repo, err := images.RepoRoot()
		if err != nil {
			return err
		}
		img, err := c.Agent(ctx, repo)
		if err != nil {
			return err
		}
		fmt.Println(img.Ref, img.Archive)
	}
	if only != "agent" {
		img, err := c.MariaDB(ctx)
		if err != nil {
			return err
		}
		fmt.Println(img.Ref, img.Archive)
	}
	return nil
}
