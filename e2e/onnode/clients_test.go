package onnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// clients are the application's, all through the primary Service: the
// writer, the bank and, where nothing may be lost, the register.
type clients struct {
	w        *writer
	bank     *bank
	register *register
}

func (c *cluster) startClients(lossless bool) *clients {
	cl := &clients{w: c.startWriter(time.Now().UnixNano() / 1000), bank: c.startBank(time.Now().UnixNano() / 1000)}
	if lossless {
		cl.register = c.startRegister(time.Now().UnixNano() / 1000)
	}
	return cl
}

// stop ends every client; later calls just return. A test defers it, so
// that on a failure no client writes on into the next test.
func (cl *clients) stop() {
	cl.w.Stop()
	cl.bank.Stop()
	if cl.register != nil {
		cl.register.Stop()
	}
}

// books is the bank's verdict and the register's, where it ran.
type books struct {
	bank     checker.BankReport
	register *checker.RegisterReport
	// readErr: a member's bank could not be read.
	readErr error
}

// judgeBooks stops the clients and judges the bank and the register; call
// it once the members have converged (finals, awaitCaughtUp).
func (c *cluster) judgeBooks(ctx context.Context, cl *clients) books {
	cl.stop()
	ledgers, err := c.ledgers(ctx)
	b := books{bank: checker.CheckBank(bankInitial, cl.bank.Stop(), ledgers), readErr: err}
	if cl.register != nil {
		r := checker.CheckRegister(cl.register.Stop(), time.Minute)
		b.register = &r
	}
	return b
}

// checkBooks stops the clients, waits for the members to converge (no
// instant has equal positions while a client writes on), judges the books
// of a test that promises nothing lost, and fails t if they break a promise.
func (c *cluster) checkBooks(t *testing.T, cl *clients, what string) {
	t.Helper()
	cl.stop()
	if err := c.awaitCaughtUp(2 * time.Minute); err != nil {
		c.dump(context.Background(), err.Error())
		t.Fatal(err)
	}
	b := c.judgeBooks(context.Background(), cl)
	t.Logf("after %s: %s", what, b)
	if v := b.violations(checker.Expect{}); len(v) > 0 {
		t.Errorf("%s broke the books:\n  %s", what, strings.Join(v, "\n  "))
	}
}

func (b books) violations(e checker.Expect) []string {
	var v []string
	if b.readErr != nil {
		v = append(v, b.readErr.Error())
	}
	v = append(v, b.bank.Violations(e)...)
	if b.register != nil {
		v = append(v, b.register.Violations()...)
	}
	return v
}

func (b books) String() string {
	s := fmt.Sprintf("bank total %d, %d transfers acked, %d lost, books right %v, checksums equal %v; ",
		b.bank.Total, b.bank.Acked, len(b.bank.Lost), len(b.bank.Wrong) == 0, b.bank.ChecksumsEqual)
	if b.register == nil {
		return s + "register not checked (the scenario may lose writes)"
	}
	return s + fmt.Sprintf("register linearizable: %s over %d operations (%d writes of unknown outcome)",
		b.register.Verdict, b.register.Ops, b.register.Unsure)
}
