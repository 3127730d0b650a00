package txn

import "github.com/twmb/franz-go/pkg/kerr"

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

var errWrite = kerr.KafkaStorageError
