package reconcile

// SQLDueDone is the sweeper's conditional delete of the due entries it looked at.
const SQLDueDone = sqlDueDone

// LiveJobKey is liveJobKey for TestLiveJobKeyIsRiversUniqueKey.
const LiveJobKey = liveJobKey
