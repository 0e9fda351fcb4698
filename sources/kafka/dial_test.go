package kafka

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/IBM/sarama"
)

func frame(n int32, body int) []byte {
	b := make([]byte, 4+body)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestFrameCheck: the lengths of a stream of answers, however the reads
// split it; the first answer at most firstFrameMax bytes, later ones at
// most sarama.MaxResponseSize; banners of other services fail at once.
func TestFrameCheck(t *testing.T) {
	big := frame(firstFrameMax+1, 0)
	for _, tc := range []struct {
		name   string
		stream []byte
		bad    bool
		length int64
	}{
		{"ApiVersions then a fetch", cat(frame(400, 400), frame(50<<20, 0)), false, 0},
		{"the smallest answer", frame(4, 4), false, 0},
		{"a frame in progress", frame(1000, 10), false, 0},
		{"SSH banner", []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"), true, 0x5353482d},
		{"MariaDB greeting", []byte("d\x00\x00\x00\n5.5.5-10.11.19-MariaDB"), true, 0x64000000},
		{"HTTP answer", []byte("HTTP/1.1 400 Bad Request\r\n"), true, 0x48545450},
		{"TLS alert to a plaintext client", []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x50}, true, 0x15030100},
		{"a first answer over 1 MiB", big, true, firstFrameMax + 1},
		{"a later answer over MaxResponseSize", cat(frame(10, 10), frame(sarama.MaxResponseSize+1, 0)), true, int64(sarama.MaxResponseSize) + 1},
		{"a negative length", frame(-1, 0), true, -1},
		{"a length under a correlation id", frame(3, 3), true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{1, 3, 7, len(tc.stream)} {
				f := frameCheck{addr: "10.0.0.1:9092"}
				var err error
				for b := tc.stream; len(b) > 0 && err == nil; {
					k := min(step, len(b))
					err = f.check(b[:k])
					b = b[k:]
				}
				var nk *NotKafkaError
				if got := errors.As(err, &nk); got != tc.bad {
					t.Fatalf("reads of %d bytes: error %v, want bad=%v", step, err, tc.bad)
				}
				if tc.bad {
					if nk.Length != tc.length || nk.Addr != "10.0.0.1:9092" || len(nk.First) == 0 {
						t.Errorf("reads of %d bytes: %+v, want length %d", step, nk, tc.length)
					}
					if again := f.check([]byte{0}); again != err {
						t.Errorf("the error is not kept: %v", again)
					}
				}
			}
		})
	}
}

// FuzzFrameCheck: any bytes, split anywhere, give the same answer as the
// whole stream at once, never a panic; a stream it accepts has every
// complete length within bounds.
func FuzzFrameCheck(f *testing.F) {
	f.Add(cat(frame(400, 400), frame(12, 12)), uint8(3))
	f.Add([]byte("SSH-2.0-OpenSSH_9.2p1\r\n"), uint8(1))
	f.Add([]byte("d\x00\x00\x00\n5.5.5-10.11.19-MariaDB"), uint8(5))
	f.Add(frame(firstFrameMax, 0), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, step uint8) {
		whole := frameCheck{}
		werr := whole.check(stream)
		split := frameCheck{}
		var serr error
		k := int(step%16) + 1
		for b := stream; len(b) > 0 && serr == nil; {
			n := min(k, len(b))
			serr = split.check(b[:n])
			b = b[n:]
		}
		if (werr == nil) != (serr == nil) {
			t.Fatalf("whole %v, split by %d %v", werr, k, serr)
		}
		if werr != nil {
			return
		}
		// Walk the frames again: each complete length is in bounds.
		for i, b := 0, stream; len(b) >= 4; i++ {
			n := int64(int32(binary.BigEndian.Uint32(b)))
			limit := int64(sarama.MaxResponseSize)
			if i == 0 {
				limit = firstFrameMax
			}
			if n < minFrame || n > limit {
				t.Fatalf("frame %d of length %d accepted", i, n)
			}
			if int64(len(b)-4) < n {
				break
			}
			b = b[4+n:]
		}
	})
}
