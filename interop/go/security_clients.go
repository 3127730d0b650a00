package main

// Each Go client's side of the security scenario (security.go): its TLS
// and SASL settings and its SCRAM credential admin API.

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha512"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"
)

// sarama leaves the SCRAM conversation to the application; xdg-go/scram
// is the implementation its documentation points to.
type saramaSCRAM struct{ conv *scram.ClientConversation }

func (x *saramaSCRAM) Begin(user, password, authzID string) error {
	c, err := scram.SHA512.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}
func (x *saramaSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *saramaSCRAM) Done() bool                            { return x.conv.Done() }

func (s *saramaClient) on(l secureListener) client {
	c := newSarama(l.bootstrap)
	c.secure = func(cfg *sarama.Config) {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, l.tls
		if l.user != "" {
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.User, cfg.Net.SASL.Password = l.user, l.password
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
		}
	}
	return c
}

func (s *saramaClient) upsertSCRAM(ctx context.Context, user, password string) error {
	if err := s.connect(); err != nil {
		return err
	}
	res, err := s.admin.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{{
		Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512, Iterations: secureIterations,
		Salt: randomSalt(), Password: []byte(password),
	}})
	return saramaSCRAMErr(res, err)
}

func (s *saramaClient) deleteSCRAM(ctx context.Context, user string) error {
	if err := s.connect(); err != nil {
		return err
	}
	res, err := s.admin.DeleteUserScramCredentials([]sarama.AlterUserScramCredentialsDelete{{
		Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512,
	}})
	return saramaSCRAMErr(res, err)
}

func saramaSCRAMErr(res []*sarama.AlterUserScramCredentialsResult, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.ErrorCode != sarama.ErrNoError {
			return fmt.Errorf("%s: %w (%s)", r.User, r.ErrorCode, deref(r.ErrorMessage))
		}
	}
	return nil
}

func (s *saramaClient) describeSCRAM(ctx context.Context, user string) (string, error) {
	if err := s.connect(); err != nil {
		return "", err
	}
	res, err := s.admin.DescribeUserScramCredentials([]string{user})
	if err != nil {
		return "", err
	}
	var out []string
	for _, r := range res {
		if r.ErrorCode != sarama.ErrNoError {
			return "", fmt.Errorf("%s: %w", r.User, r.ErrorCode)
		}
		for _, ci := range r.CredentialInfos {
			out = append(out, fmt.Sprintf("%s/%d", ci.Mechanism, ci.Iterations))
		}
	}
	return strings.Join(out, ","), nil
}

func (s *saramaClient) authFailed(err error) bool {
	return errors.Is(err, sarama.ErrSASLAuthenticationFailed)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (k *kafkaGo) on(l secureListener) client {
	c := newKafkaGo(l.bootstrap)
	c.transport = &kafka.Transport{TLS: l.tls}
	c.dialer = &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: l.tls}
	if l.user != "" {
		mech, err := kafkascram.Mechanism(kafkascram.SHA512, l.user, l.password)
		if err != nil {
			panic(err) // only for an unprintable user name
		}
		c.transport.SASL, c.dialer.SASLMechanism = mech, mech
	}
	c.client.Transport = c.transport
	return c
}

// upsertSCRAM: kafka-go sends the salted password the caller computes
// (SCRAM's Hi: PBKDF2 with HMAC-SHA-512).
func (k *kafkaGo) upsertSCRAM(ctx context.Context, user, password string) error {
	salt := randomSalt()
	salted, err := pbkdf2.Key(sha512.New, password, salt, secureIterations, sha512.Size)
	if err != nil {
		return err
	}
	return k.alterSCRAM(ctx, &kafka.AlterUserScramCredentialsRequest{Upsertions: []kafka.UserScramCredentialsUpsertion{{
		Name: user, Mechanism: kafka.ScramMechanismSha512, Iterations: secureIterations, Salt: salt, SaltedPassword: salted,
	}}})
}

func (k *kafkaGo) deleteSCRAM(ctx context.Context, user string) error {
	return k.alterSCRAM(ctx, &kafka.AlterUserScramCredentialsRequest{Deletions: []kafka.UserScramCredentialsDeletion{{
		Name: user, Mechanism: kafka.ScramMechanismSha512,
	}}})
}

func (k *kafkaGo) alterSCRAM(ctx context.Context, req *kafka.AlterUserScramCredentialsRequest) error {
	resp, err := k.client.AlterUserScramCredentials(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range resp.Results {
		if r.Error != nil {
			return fmt.Errorf("%s: %w", r.User, r.Error)
		}
	}
	return nil
}

func (k *kafkaGo) describeSCRAM(ctx context.Context, user string) (string, error) {
	resp, err := k.client.DescribeUserScramCredentials(ctx, &kafka.DescribeUserScramCredentialsRequest{
		Users: []kafka.UserScramCredentialsUser{{Name: user}}})
	if err != nil {
		return "", err
	}
	if resp.Error != nil {
		return "", resp.Error
	}
	var out []string
	for _, r := range resp.Results {
		if r.Error != nil {
			return "", fmt.Errorf("%s: %w", r.User, r.Error)
		}
		for _, ci := range r.CredentialInfos {
			mech := fmt.Sprint("mechanism ", ci.Mechanism)
			if ci.Mechanism == kafka.ScramMechanismSha512 {
				mech = "SCRAM-SHA-512"
			}
			out = append(out, fmt.Sprintf("%s/%d", mech, ci.Iterations))
		}
	}
	return strings.Join(out, ","), nil
}

func (k *kafkaGo) authFailed(err error) bool {
	return errors.Is(err, kafka.SASLAuthenticationFailed)
}

func (f *franz) on(l secureListener) client {
	// franz-go retries a refused connection until a request's retry
	// timeout and a record's delivery timeout, then hands back the
	// broker's error (with no timeout, ProduceSync waits for ever).
	opts := []kgo.Opt{kgo.DialTLSConfig(l.tls), kgo.RetryTimeout(5 * time.Second), kgo.RecordDeliveryTimeout(10 * time.Second)}
	if l.user != "" {
		opts = append(opts, kgo.SASL(franzscram.Auth{User: l.user, Pass: l.password}.AsSha512Mechanism()))
	}
	return newFranz(l.bootstrap, opts...)
}

func (f *franz) upsertSCRAM(ctx context.Context, user, password string) error {
	res, err := f.admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: secureIterations, Password: password,
	}})
	return franzSCRAMErr(res, err)
}

func (f *franz) deleteSCRAM(ctx context.Context, user string) error {
	res, err := f.admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha512}}, nil)
	return franzSCRAMErr(res, err)
}

func franzSCRAMErr(res kadm.AlteredUserSCRAMs, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", r.User, r.Err, r.ErrMessage)
		}
	}
	return nil
}

func (f *franz) describeSCRAM(ctx context.Context, user string) (string, error) {
	res, err := f.admin.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return "", err
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			return "", fmt.Errorf("%s: %w", r.User, r.Err)
		}
		for _, ci := range r.CredInfos {
			out = append(out, fmt.Sprintf("%s/%d", ci.Mechanism, ci.Iterations))
		}
	}
	return strings.Join(out, ","), nil
}

func (f *franz) authFailed(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed)
}
