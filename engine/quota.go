package engine

import "github.com/sluice-broker/sluice/metadata"

// quotaState holds the client quotas of the image (filled in by the
// quota work that follows; nothing is throttled yet).
type quotaState struct{}

func (b *Broker) applyQuotas(metadata.Image) {}
