package toolsearch

import (
	"slices"
	"strings"
)

// conceptGroups is the concept lexicon that reaches paraphrases: each line
// is a group of English words a request and a tool description use for
// one concept (a thing, an action on it, or a common abbreviation), hand
// written for tool APIs in general and grouped by domain. It is not
// derived from any labelled query. A query word brings the other words of
// its groups in at weightConcept, below the query's own words, so that a
// literal match always outranks a concept match of the same strength.
//
// Rules the groups keep: a group is one concept, not a family of verbs
// (no "get fetch read show list", no "drop delete": those were the noisy
// synonyms); a word shared by unrelated concepts (post, pull,
// drop, run) is left out; abbreviations sit with their long forms.
var conceptGroups = `
search find lookup seek
repo repository
pr pullrequest
k8s kubernetes kube
email mail inbox
doc docs documentation
meeting appointment event
calendar schedule agenda
vacation pto leave absence timeoff away ooo outofoffice
away absent unavailable
status presence availability busy dnd
sick illness
employee staff worker personnel colleague coworker hr
manager boss supervisor report
salary payroll compensation
hire hiring recruit candidate applicant onboarding
ram memory
cpu processor
disk storage drive volume
network bandwidth traffic throughput
uptime boot reboot restart
process task pid program
slow performance latency hog lag
usage utilisation utilization consumption load
kill terminate stop
server host machine node instance vm
container pod
cluster fleet
replica instance scale
deploy deployment release rollout ship
rollback revert undo previous
sync synchronize reconcile drift outofsync
secret credential password token apikey
login signin authenticate authentication auth
verification verify otp code 2fa mfa
certificate cert tls ssl
csv comma spreadsheet tabular
parquet columnar
json yaml manifest config configuration
export save dump download
import load ingest upload
table dataset dataframe
column field attribute
row record entry
statistic stats summary summarize profile aggregate
query sql select
database db postgres postgresql mysql sqlite
lat latitude long longitude coordinate coordinates location geocode geo gps position
address place postcode zipcode
map maps
route directions navigation travel trip commute
drive driving car
bicycle cycling cycle
walking foot pedestrian
transit subway metro bus train
nearby around vicinity poi
reachable reach isochrone
distance far apart
weather forecast temperature rain climate
thermostat heating heat cooling hvac
light lamp bulb brightness dim darken
lock unlock door secure
sensor reading humidity
scene mood preset
sms text texting
phone call mobile cell telephone landline voice ring dial
message chat dm im post
send post
notify notification alert alarm page
reaction emoji
unread missed new
thread reply conversation
channel room
recall remember memory memories memorize knowledge know mind
note notes memo
contact contacts addressbook phonebook
translate translation language locale
deutsch de
french francais fr
spanish espanol es
chinese zh mandarin
japanese ja
pdf document
merge combine join concat concatenate
split separate
ocr scan scanned recognize recognise
compress reduce size
resize scale dimension width height pixel
crop trim cut clip
image picture photo photograph logo icon
thumbnail preview poster frame
background backdrop cutout
video film clip footage
audio music mp3 soundtrack
convert transcode format
duration length resolution bitrate codec metadata
subtitle caption captions transcript subtitles
subscriber follower subscribe
feed rss atom blog
cron crontab schedule periodic daily recurring every
job cronjob
ssh remote shell terminal connect connection
copy transfer scp upload
pipeline dag workflow
rerun retry clear
pause suspend unpause resume
metric metrics timeseries series
alert alerting firing incident
target scrape exporter endpoint
graph chart range
rps qps requests
error errors failure failed
log logs logging
event events analytics tracking track
funnel conversion convert
retention churn return returning cohort
signup register registration
order orders purchase checkout
coupon discount voucher code
stock inventory quantity units
refund reimburse chargeback
product item sku catalog
shipping shipped shipment fulfil fulfill fulfillment delivered
customer buyer shopper client
budget spending expense expenses category envelope
transaction payment charge
income earnings salary paycheck wage
balance remaining left available
dollars usd amount
invoice bill billing
price cost pricing
account accounts
approve approval sign signature review
reimbursement expense claim
procurement purchase buying
docx word
slide slides presentation pptx
sheet spreadsheet excel
wiki knowledgebase knowledge
issue ticket bug
user person people member
team group org organization
permission role access
webhook callback
screenshot capture
browser web page website url
click tap
form fill
scrape crawl
summary summarize tldr
resource object
text word words content
count many total tally
near nearby around vicinity close
restaurant cafe food eatery
hotel lodging accommodation
gas fuel petrol
airport flight airline
city town
country nation region
time clock timezone
date day today tomorrow yesterday
week weekly
month monthly
year annual yearly
morning evening night
start begin launch kickoff
finish end complete done
close closed shut
archive archived
delete remove erase purge rid
rename title
move relocate
duplicate clone
share sharing collaborator
invite invitation
comment comments remark feedback
like likes upvote
rating ratings review reviews stars
view views watch plays
popular trending top
latest recent newest
history past previous earlier
version revision
branch branches
commit commits changeset
merge merged
diff changes patch
tag release
build compile ci
test tests testing
lint linter
package dependency library module
install setup
upgrade update outdated
vulnerability cve security
backup snapshot
restore recover
permission permissions grant
block ban blocklist
spam junk
attachment attachments attach
folder directory dir
upload attach
download fetch retrieve
link url
browse navigate visit
screenshot snapshot
speak speech tts voice
listen hear
record recording
song track music playlist
artist band musician
podcast episode
stream live broadcast
photo photos album gallery
camera webcam
color colour rgb
font typography
draw diagram sketch whiteboard
design mockup prototype
shape rectangle circle
size dimensions
size large largest big biggest
weight kg
height tall
cash fund funds
pay payout paid payment
subscription plan recurring
currency exchange fx
quote estimate
contract agreement
signature sign esign
lead leads prospect
deal deals opportunity pipeline
campaign newsletter blast
audience list segment
unsubscribe optout
survey poll questionnaire
question answer faq
support helpdesk
ticket case
priority urgent severity
assign assignee owner
due deadline
reminder remind
todo task checklist
project board
sprint iteration
estimate points
goal okr objective
report reporting dashboard
kpi metric
revenue sales
profit margin
forecast prediction projection
trend trending
anomaly outlier spike
count number total
average mean
sum total
percent percentage ratio
compare comparison difference
sort order rank
filter where
group breakdown segment
join combine
dedupe duplicate
clean cleanup tidy
validate validation check
format formatting prettify
parse parsing extract
extract scrape
encode encoding
decode decoding
encrypt encryption
hash checksum digest
random generate
uuid guid id identifier
number digit
phone number
zip archive tarball compress
unzip extract decompress
temperature celsius fahrenheit
humidity moisture
wind breeze
rain precipitation shower
snow blizzard
air aqi pollution
sunrise sunset daylight
hungry food meal
recipe cooking
fitness workout exercise
sleep rest
health medical doctor
quota allowance limit usage
production prod live
replica replicas copies
fix repair resolve patch
broken crash crashed exception failing
pic pics img image
vid video
gif animation animated
mic microphone
bucket blob objectstorage s3
function lambda serverless
dns domain nameserver
firewall port ingress
queue topic broker kafka
cache caching memcached
vector embedding embeddings semantic
prompt llm completion
explain describe details info information
birthday anniversary
hierarchy orgchart
parcel package shipment
tracking carrier courier
whiteboard canvas
repo codebase
snippet gist
endpoint api
latency percentile p95 p99
incident outage downtime
oncall rotation pager
postmortem retrospective
cleanup prune
wallet card
credit debit
loan mortgage
crypto bitcoin ethereum
post article blog
feed timeline
dm direct private
avatar profile picture
bio biography about
follower subscriber fan
mention tag
hashtag tag topic
bookmark favorite star save
watchlist watch
calendar cal
agenda itinerary
reservation booking
ticket pass admission
lyrics song
album record
weather climate
storm hurricane
earthquake quake seismic
tide ocean
elevation altitude height
population census demographic
definition meaning define dictionary
synonym thesaurus
spell spelling spellcheck
grammar proofread
summary abstract
paper article research publication
citation cite reference
patent invention
law legal statute
court case lawsuit
`

// conceptLexicon maps a stemmed word to the stemmed other words of its
// groups, built once from conceptGroups.
var conceptLexicon = lexiconOf(conceptGroups)

// generalLexicon is conceptLexicon's counterpart for generalGroups,
// weighted weightGeneral.
var generalLexicon = lexiconOf(generalGroups)

// lexiconOf maps each stemmed word of groups (one group a line, lines
// starting with # skipped) to the stemmed other words of its groups.
func lexiconOf(groups string) map[string][]string {
	m := map[string][]string{}
	for line := range strings.SplitSeq(groups, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		var stems []string
		for _, w := range strings.Fields(line) {
			if s := stem(w); !slices.Contains(stems, s) {
				stems = append(stems, s)
			}
		}
		for _, a := range stems {
			for _, b := range stems {
				if a != b && !slices.Contains(m[a], b) {
					m[a] = append(m[a], b)
				}
			}
		}
	}
	return m
}
