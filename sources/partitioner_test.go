package sources

import (
	"math/rand/v2"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Java Utils.murmur2 values. The first six are Kafka's own
// clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
// (testMurmur2); the last five are akka's Murmur2Spec, which pins its port
// to values taken from the Java implementation. (kafkajs's "legacy"
// murmur2 vectors are NOT Java's: that partitioner is known to differ.)
var javaMurmur2 = []struct {
	key  string
	hash int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
	{"1", -1993445489},
	{"12", 126087238},
	{"123", -267702483},
	{"1234", -1614185708},
	{"12345", -1188365604},
}

func TestMurmur2JavaVectors(t *testing.T) {
	for _, tc := range javaMurmur2 {
		if got := murmur2([]byte(tc.key)); got != tc.hash {
			t.Errorf("murmur2(%q) = %d, want %d (Java Utils.murmur2)", tc.key, got, tc.hash)
		}
	}
}

func TestPartitionForMurmur2(t *testing.T) {
	// Expected partitions written out by hand from the Java hashes above:
	// Utils.toPositive(h) % n, toPositive(h) = h & 0x7fffffff.
	cases := []struct {
		key  string
		n    int32
		want int32
	}{
		{"21", 1, 0},
		{"21", 3, 0},       // -973932308 & 0x7fffffff = 1173551340
		{"foobar", 12, 6},  // -790332482 & 0x7fffffff = 1357151166
		{"abc", 10, 7},     // 479470107
		{"1", 10, 9},       // -1993445489 & 0x7fffffff = 154038159
		{"12", 7, 4},       // 126087238
		{"12345", 100, 44}, // -1188365604 & 0x7fffffff = 959118044
	}
	// Recompute each expectation from the literal hash as well, so a typo
	// in a hand-written value is caught as a table error.
	hashes := map[string]int32{}
	for _, v := range javaMurmur2 {
		hashes[v.key] = v.hash
	}
	for _, tc := range cases {
		want := (hashes[tc.key] & 0x7fffffff) % tc.n
		if want != tc.want {
			t.Fatalf("table error for %q %% %d: hand value %d, arithmetic %d", tc.key, tc.n, tc.want, want)
		}
		got, err := PartitionFor("murmur2", []byte(tc.key), tc.n)
		if err != nil || got != tc.want {
			t.Errorf("PartitionFor(murmur2, %q, %d) = %d, %v; want %d", tc.key, tc.n, got, err, tc.want)
		}
	}
}

func randomKeys(seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keys := make([][]byte, 0, n+4)
	keys = append(keys, []byte{}, []byte("PAY-1"), []byte("order-00042"), []byte{0xff, 0xfe, 0x80, 0x00})
	for range n {
		k := make([]byte, rng.IntN(64))
		for i := range k {
			k[i] = byte(rng.UintN(256))
		}
		keys = append(keys, k)
	}
	return keys
}

func TestPartitionForMurmur2MatchesFranzGo(t *testing.T) {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, key := range randomKeys(1, 2000) {
		for _, n := range []int32{1, 2, 3, 6, 7, 12, 64, 100, 1000} {
			want := int32(tp.Partition(&kgo.Record{Key: key}, int(n)))
			got, err := PartitionFor("murmur2", key, n)
			if err != nil || got != want {
				t.Fatalf("murmur2 key %x n %d: got %d, %v; franz-go KafkaHasher says %d", key, n, got, err, want)
			}
		}
	}
}

func TestPartitionForMatchesSarama(t *testing.T) {
	cases := []struct {
		name string
		new  func(string) sarama.Partitioner
	}{
		{"fnv1a", sarama.NewHashPartitioner},
		{"crc32", sarama.NewConsistentCRCHashPartitioner},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := c.new("t")
			for _, key := range randomKeys(2, 2000) {
				if len(key) == 0 {
					// sarama treats a nil key as "random" but an empty,
					// non-nil key is hashed; ByteEncoder keeps it non-nil.
					key = []byte{}
				}
				for _, n := range []int32{1, 2, 3, 6, 7, 12, 64, 100, 1000} {
					want, err := sp.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, n)
					if err != nil {
						t.Fatal(err)
					}
					got, err := PartitionFor(c.name, key, n)
					if err != nil || got != want {
						t.Fatalf("%s key %x n %d: got %d, %v; sarama says %d", c.name, key, n, got, err, want)
					}
				}
			}
		})
	}
}

func TestPartitionForKnownValues(t *testing.T) {
	// Values that pin the arithmetic independently of the reference
	// libraries (computed with Python's zlib.crc32 and a textbook fnv-1a).
	// fnv1a("PAY-1") = 0xbcaaf787, negative as an int32: sarama's default
	// partitioner takes the remainder and negates it (5 of 12), where the
	// Java-style mask would give 3.
	cases := []struct {
		partitioner string
		key         string
		n           int32
		want        int32
	}{
		{"fnv1a", "PAY-1", 12, 5},
		{"fnv1a", "PAY-1", 7, 5},
		{"fnv1a", "order-00042", 7, 5}, // 0x66304998, positive
		{"fnv1a", "21", 7, 3},          // 0x8cf297ec
		{"crc32", "PAY-1", 12, 4},      // 0xcf004864, taken unsigned
		{"crc32", "PAY-1", 7, 0},
		{"crc32", "order-00042", 12, 10}, // 0x05ca28ea
		{"crc32", "foobar", 7, 6},        // 0x9ef61f95
	}
	for _, tc := range cases {
		p, err := PartitionFor(tc.partitioner, []byte(tc.key), tc.n)
		if err != nil || p != tc.want {
			t.Errorf("PartitionFor(%s, %q, %d) = %d, %v; want %d", tc.partitioner, tc.key, tc.n, p, err, tc.want)
		}
	}
}

func TestPartitionForErrors(t *testing.T) {
	for _, tc := range []struct {
		partitioner string
		n           int32
	}{
		{"stored", 3},
		{"", 3},
		{"random", 3},
		{"MURMUR2", 3},
		{"murmur2", 0},
		{"crc32", -1},
	} {
		if p, err := PartitionFor(tc.partitioner, []byte("k"), tc.n); err == nil {
			t.Errorf("PartitionFor(%q, k, %d) = %d, want an error", tc.partitioner, tc.n, p)
		}
	}
}
