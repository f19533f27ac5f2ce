// Copyright 2018 Google LLC. All Rights Reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package expr

import (
	"encoding/binary"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/xt"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

type QueueAttribute uint16

type QueueFlag uint16

// Possible QueueAttribute values
const (
	QueueNum   QueueAttribute = unix.NFTA_QUEUE_NUM
	QueueTotal QueueAttribute = unix.NFTA_QUEUE_TOTAL
	QueueFlags QueueAttribute = unix.NFTA_QUEUE_FLAGS

	QueueFlagBypass QueueFlag = unix.NFT_QUEUE_FLAG_BYPASS
	QueueFlagFanout QueueFlag = unix.NFT_QUEUE_FLAG_CPU_FANOUT
	QueueFlagMask   QueueFlag = unix.NFT_QUEUE_FLAG_MASK
)

type Queue struct {
	Num   uint16
	Total uint16
	Flag  QueueFlag
}

// marshal encodes the queue verdict as the xtables NFQUEUE target (revision 3) through nft_compat, where upstream
// encodes the nftables queue expression: the node suite's kernel has nfnetlink_queue and xt_NFQUEUE but no nft_queue
// (CONFIG_NFT_QUEUE unset) and refuses the expression with ENOENT. Both give the packet to the same nfnetlink queue,
// with the same number, span and flags. This file replaces expr/queue.go of github.com/google/nftables v0.3.0 in
// test/node/build-node.sh's build of kube-network-policies (a patched copy of the module); the rest is upstream's.
// (The directory's leading underscore keeps the go tool from taking it for a package of test/node/netpol.)
func (e *Queue) marshal(fam byte) ([]byte, error) {
	if e.Total == 0 {
		e.Total = 1 // The total default value is 1
	}
	var flags uint16
	if e.Flag&QueueFlagBypass != 0 {
		flags |= 0x1 // NFQ_FLAG_BYPASS
	}
	if e.Flag&QueueFlagFanout != 0 {
		flags |= 0x2 // NFQ_FLAG_CPU_FANOUT
	}
	// struct xt_NFQ_info_v3 { __u16 queuenum; __u16 queues_total; __u16 flags; }, host order, padded to XT_ALIGN.
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:], e.Num)
	binary.NativeEndian.PutUint16(info[2:], e.Total)
	binary.NativeEndian.PutUint16(info[4:], flags)
	payload := xt.Unknown(info)
	return (&Target{Name: "NFQUEUE", Rev: 3, Info: &payload}).marshal(fam)
}

func (e *Queue) marshalData(fam byte) ([]byte, error) {
	if e.Total == 0 {
		e.Total = 1 // The total default value is 1
	}
	return netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_QUEUE_NUM, Data: binaryutil.BigEndian.PutUint16(e.Num)},
		{Type: unix.NFTA_QUEUE_TOTAL, Data: binaryutil.BigEndian.PutUint16(e.Total)},
		{Type: unix.NFTA_QUEUE_FLAGS, Data: binaryutil.BigEndian.PutUint16(uint16(e.Flag))},
	})
}

func (e *Queue) unmarshal(fam byte, data []byte) error {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_QUEUE_NUM:
			e.Num = ad.Uint16()
		case unix.NFTA_QUEUE_TOTAL:
			e.Total = ad.Uint16()
		case unix.NFTA_QUEUE_FLAGS:
			e.Flag = QueueFlag(ad.Uint16())
		}
	}
	return ad.Err()
}
