package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// DefaultVersion is the Kafka version assumed when the configuration names
// none (docs/config.md example: "3.5.0").
const DefaultVersion = "3.5.0"

// DefaultClientID is the client.id opctl presents when none is configured.
const DefaultClientID = "opctl"

// kafkaVersion maps a configured version string to one sarama knows. A
// version newer than sarama's newest is clamped to it, an unknown patch
// release to the closest older release sarama lists (request versions are
// negotiated down with ApiVersions anyway), and an unparsable string to
// sarama's DefaultVersion (2.8.0, which sarama fully covers).
func kafkaVersion(s string) sarama.KafkaVersion {
	if s == "" {
		s = DefaultVersion
	}
	v, err := sarama.ParseKafkaVersion(s)
	if err != nil {
		return sarama.DefaultVersion
	}
	if v.IsAtLeast(sarama.MaxVersion) {
		return sarama.MaxVersion
	}
	best := sarama.MinVersion
	for _, sv := range sarama.SupportedVersions {
		if v.IsAtLeast(sv) && sv.IsAtLeast(best) {
			best = sv
		}
	}
	return best
}

// isolation is cfg's kafka.isolation_level as sarama's: read_uncommitted
// (Kafka's consumer default) unless read_committed.
func isolation(cfg config.Kafka) sarama.IsolationLevel {
	if cfg.EffectiveIsolationLevel() == config.ReadCommitted {
		return sarama.ReadCommitted
	}
	return sarama.ReadUncommitted
}

// saramaConfig builds the one sarama configuration every connection of a
// Reader shares. Reading TLS files can fail, hence the error.
func saramaConfig(cfg config.Kafka, timeout time.Duration) (*sarama.Config, error) {
	if timeout <= 0 {
		timeout = sources.DefaultTimeout
	}
	c := sarama.NewConfig()
	c.Version = kafkaVersion(cfg.Version)
	c.ClientID = cfg.ClientID
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	c.Net.DialTimeout = timeout
	c.Net.ReadTimeout = timeout
	c.Net.WriteTimeout = timeout
	// Only the topics opctl asks about; never create one by asking.
	c.Metadata.Full = false
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Retry.Max = 1
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	c.Metadata.Timeout = timeout

	// What the consumers read; Locate fetches with it (docs/where.md).
	c.Consumer.IsolationLevel = isolation(cfg)
	if c.Consumer.IsolationLevel == sarama.ReadCommitted && !c.Version.IsAtLeast(sarama.V0_11_0_0) {
		return nil, fmt.Errorf("kafka: isolation_level read_committed needs kafka.version 0.11.0 or newer (transactions), not %s: raise kafka.version or set isolation_level: read_uncommitted", c.Version)
	}

	// Publish (republish actions) sends to an exact partition and waits for
	// every in-sync replica. Idempotence stays off: a replay is deduplicated
	// by the consumer's msg id, not by the producer id. The producer never
	// re-sends by itself: a request whose answer was lost may have been
	// written, and a retry would write the record twice; apply looks it up
	// in the partition instead (publish.go, docs/repair.md).
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = false
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Timeout = timeout
	c.Producer.Retry.Max = 0
	c.Producer.Retry.Backoff = 100 * time.Millisecond

	// Every connection (the reads', and Publish's producer too) is made by
	// dialer: the dial and the TLS handshake are bounded by the timeout,
	// and the length of every answer is checked before sarama sizes a
	// buffer by it, so that an address where another service listens is
	// an error naming it, not gigabytes allocated by its banner (dial.go).
	d := &dialer{timeout: timeout}
	if t := cfg.TLS; t != nil && t.Enabled {
		tc, err := tlsConfig(t)
		if err != nil {
			return nil, err
		}
		d.tls = tc
	}
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = d
	if s := cfg.SASL; s != nil && s.Mechanism != "" {
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Version = sarama.SASLHandshakeV1
		c.Net.SASL.User = s.User
		c.Net.SASL.Password = s.Password
		switch strings.ToUpper(s.Mechanism) {
		case "PLAIN":
			c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			c.Net.SASL.SCRAMClientGeneratorFunc = scramSHA256
		case "SCRAM-SHA-512":
			c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			c.Net.SASL.SCRAMClientGeneratorFunc = scramSHA512
		default:
			return nil, fmt.Errorf("kafka: unsupported SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Mechanism)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: configuration: %w", err)
	}
	return c, nil
}

func tlsConfig(t *config.TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} // #nosec G402 -- operator's explicit choice
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: tls ca_file %s: no PEM certificate found", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: tls cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
