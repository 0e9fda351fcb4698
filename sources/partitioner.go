package sources

import (
	"fmt"
	"hash/crc32"
	"hash/fnv"

	"github.com/opctl-dev/opctl/sources/config"
)

// PartitionFor returns the partition the named partitioner (a pipeline's
// `partitioner`: config.PartitionerMurmur2, PartitionerFNV1a,
// PartitionerCRC32) puts key in, for a topic with numPartitions partitions.
// It reproduces the producers' own arithmetic bit for bit:
//   - murmur2 is the Java client's default for keyed records:
//     toPositive(murmur2(key)) % numPartitions;
//   - fnv1a is sarama's default NewHashPartitioner: fnv-1a 32 of the key as
//     an int32, modulo numPartitions, negated when negative;
//   - crc32 is sarama's NewConsistentCRCHashPartitioner and librdkafka's
//     `consistent` partitioner: the unsigned crc32 (IEEE) of the key modulo
//     numPartitions.
//
// "stored" (the partition is only known from the state row) and any unknown
// name are errors, as is a non-positive partition count. It is pure: the
// planner places a republished record with it, and the Kafka driver
// locates a message with it.
func PartitionFor(partitioner string, key []byte, numPartitions int32) (int32, error) {
	if numPartitions <= 0 {
		return -1, fmt.Errorf("kafka: cannot partition over %d partitions", numPartitions)
	}
	switch partitioner {
	case config.PartitionerMurmur2:
		return int32(uint32(murmur2(key))&0x7fffffff) % numPartitions, nil
	case config.PartitionerFNV1a:
		h := fnv.New32a()
		_, _ = h.Write(key)
		p := int32(h.Sum32()) % numPartitions
		if p < 0 {
			p = -p
		}
		return p, nil
	case config.PartitionerCRC32:
		return int32(crc32.ChecksumIEEE(key) % uint32(numPartitions)), nil
	case config.PartitionerStored:
		return -1, fmt.Errorf("kafka: partitioner %q: the partition can only come from the stored position", partitioner)
	default:
		return -1, fmt.Errorf("kafka: unknown partitioner %q (want murmur2, fnv1a, crc32 or stored)", partitioner)
	}
}

// murmur2 is org.apache.kafka.common.utils.Utils.murmur2, with Java's signed
// 32-bit arithmetic (wrap-around multiplication, >>> as an unsigned shift).
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	length4 := length / 4
	for i := range length4 {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}
