package kafka

import (
	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// scramClient is sarama's SCRAMClient over github.com/xdg-go/scram, as
// sarama documents it (its sasl_scram_client example): SCRAM-SHA-256/512
// as Kafka speaks it, with SASLprep of the name and password and the
// server's signature verified in the last step.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

var _ sarama.SCRAMClient = (*scramClient)(nil)

// Begin implements sarama.SCRAMClient: a new conversation for user.
func (s *scramClient) Begin(user, pass, authzID string) error {
	c, err := s.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

// Step implements sarama.SCRAMClient.
func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

// Done implements sarama.SCRAMClient.
func (s *scramClient) Done() bool { return s.conv.Done() }

// scramSHA256 and scramSHA512 are sarama's SCRAMClientGeneratorFunc for
// each mechanism.
func scramSHA256() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
func scramSHA512() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
