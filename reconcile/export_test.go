package reconcile

// LiveJobKey is liveJobKey for TestLiveJobKeyIsRiversUniqueKey.
const LiveJobKey = liveJobKey
