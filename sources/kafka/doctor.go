package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// DoctorFacts reads what `opctl doctor` judges from the cluster into f
// (docs/doctor.md): for each pipeline whether its topic exists and its
// partition count (metadata), the topic's retention.ms (DescribeConfigs),
// the group's state and members (DescribeGroups); and the broker's
// offsets.retention.minutes (DescribeConfigs of the controller). Nothing is
// written. A fact that could not be read holds why; a cluster that cannot
// be reached at all sets f.KafkaErr.
func (r *Reader) DoctorFacts(ctx context.Context, pipelines []*config.Pipeline, f *sources.DoctorFacts) {
	if f.Pipelines == nil {
		f.Pipelines = map[string]sources.PipelineFacts{}
	}
	topics, err := r.Topics(ctx)
	if err != nil {
		f.KafkaErr = err.Error()
		return
	}
	opCtx, cancel := r.op(ctx)
	defer cancel()
	c, err := r.getClient()
	if err != nil {
		f.KafkaErr = r.fail(ctx, opCtx, "connect", err).Error()
		return
	}
	b, err := call(opCtx, func() (*sarama.Broker, error) { return c.Controller() })
	if err != nil {
		f.OffsetsRetentionErr = r.fail(ctx, opCtx, "find the controller", err).Error()
	} else {
		v, err := call(opCtx, func() (string, error) {
			return describeConfig(b, c.Config().Version, sarama.BrokerResource, strconv.Itoa(int(b.ID())), "offsets.retention.minutes")
		})
		switch {
		case err != nil:
			f.OffsetsRetentionErr = r.fail(ctx, opCtx, "describe the broker's offsets.retention.minutes", err).Error()
		default:
			m, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil || m <= 0 {
				f.OffsetsRetentionErr = fmt.Sprintf("offsets.retention.minutes is %q", v)
			} else {
				f.OffsetsRetention = time.Duration(m) * time.Minute
			}
		}
	}
	for _, p := range pipelines {
		pf := f.Pipelines[p.Name]
		pf.TopicExists = slices.Contains(topics, p.Topic)
		if pf.TopicExists {
			if n, err := r.PartitionCount(ctx, p.Topic); err != nil {
				pf.TopicErr = err.Error()
			} else {
				pf.Partitions = n
			}
			if b != nil {
				v, err := call(opCtx, func() (string, error) {
					return describeConfig(b, c.Config().Version, sarama.TopicResource, p.Topic, "retention.ms")
				})
				if err != nil {
					pf.RetentionErr = r.fail(ctx, opCtx, "describe topic "+p.Topic+"'s retention.ms", err).Error()
				} else if ms, perr := strconv.ParseInt(v, 10, 64); perr != nil {
					pf.RetentionErr = fmt.Sprintf("retention.ms is %q", v)
				} else if ms < 0 {
					pf.Retention = -1
				} else {
					pf.Retention = time.Duration(ms) * time.Millisecond
				}
			} else {
				pf.RetentionErr = f.OffsetsRetentionErr
			}
		}
		d, err := call(opCtx, func() (*sarama.GroupDescription, error) { return r.describeGroup(c, p.Group) })
		switch {
		case err != nil:
			pf.GroupErr = r.fail(ctx, opCtx, "describe group "+p.Group, err).Error()
		case errors.Is(d.Err, sarama.ErrGroupIDNotFound):
			pf.GroupState = ""
		default:
			pf.GroupState, pf.GroupMembers = d.State, len(d.Members)
		}
		f.Pipelines[p.Name] = pf
	}
}

// describeConfig reads one config of one resource from broker b, with the
// request version sarama's admin client uses for the cluster version v
// (Kafka 4 no longer answers version 0).
func describeConfig(b *sarama.Broker, v sarama.KafkaVersion, typ sarama.ConfigResourceType, name, key string) (string, error) {
	req := &sarama.DescribeConfigsRequest{Resources: []*sarama.ConfigResource{{Type: typ, Name: name, ConfigNames: []string{key}}}}
	switch {
	case v.IsAtLeast(sarama.V2_8_0_0):
		req.Version = 4
	case v.IsAtLeast(sarama.V2_6_0_0):
		req.Version = 3
	case v.IsAtLeast(sarama.V2_0_0_0):
		req.Version = 2
	case v.IsAtLeast(sarama.V1_1_0_0):
		req.Version = 1
	}
	resp, err := b.DescribeConfigs(req)
	if err != nil {
		return "", err
	}
	for _, rr := range resp.Resources {
		if rr.ErrorCode != 0 {
			kerr := sarama.KError(rr.ErrorCode)
			if rr.ErrorMsg != "" {
				return "", fmt.Errorf("%w: %s", kerr, rr.ErrorMsg)
			}
			return "", kerr
		}
		for _, c := range rr.Configs {
			if c.Name == key {
				return c.Value, nil
			}
		}
	}
	return "", fmt.Errorf("the broker did not return %s for %s", key, name)
}
