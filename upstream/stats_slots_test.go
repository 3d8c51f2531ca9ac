package upstream

import "testing"

// TestItemTypeSlots: each named slot is the index of its item type, and
// itemTypeIndex finds it.
func TestItemTypeSlots(t *testing.T) {
	for name, slot := range map[string]int{
		"event": itemEvent, "transaction": itemTransaction, "session": itemSession, "sessions": itemSessions,
		"log": itemLog, "span": itemSpan, "client_report": itemClientReport, "metric_buckets": itemMetricBuckets,
		"statsd": itemStatsd, "metric_meta": itemMetricMeta, "attachment": itemAttachment,
		"user_report": itemUserReport, "unreal_report": itemUnrealReport,
	} {
		if itemTypes[slot] != name || itemTypeIndex([]byte(name)) != slot {
			t.Errorf("%s: slot %d holds %q, itemTypeIndex says %d", name, slot, itemTypes[slot], itemTypeIndex([]byte(name)))
		}
	}
}
