package device

import (
	"context"
	"fmt"
	"io"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/secagg"
)

// logged is a device's transport that writes a line to out after each
// message the server accepted (operators and the end-to-end tests follow
// a device's progress by them).
type logged struct {
	secagg.ClientTransport
	out  io.Writer
	info types.JoinInfo
}

func (l logged) AdvertiseKeys(ctx context.Context, m secagg.AdvertiseKeysMsg) error {
	if err := l.ClientTransport.AdvertiseKeys(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(l.out, "round %d: joined as client %d\n", l.info.Round, l.info.ClientID)
	return nil
}

func (l logged) ShareKeys(ctx context.Context, m secagg.ShareKeysMsg) error {
	if err := l.ClientTransport.ShareKeys(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(l.out, "round %d: shares sent to %d neighbours\n", l.info.Round, len(m.Shares))
	return nil
}

func (l logged) MaskedInput(ctx context.Context, m secagg.MaskedInputMsg) error {
	if err := l.ClientTransport.MaskedInput(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(l.out, "round %d: masked input sent\n", l.info.Round)
	return nil
}

func (l logged) Unmask(ctx context.Context, m secagg.UnmaskMsg) error {
	if err := l.ClientTransport.Unmask(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(l.out, "round %d: unmask shares sent (%d survivors, %d dropped)\n", l.info.Round, len(m.SelfShares), len(m.MaskKeyShares))
	return nil
}
