package toolsearch

// generalGroups widen the concept lexicon (conceptGroups) systematically
// instead of by misses (words added for the tuning queries'
// misses did not carry over to the held-out set). They were written from
// general knowledge, family by family, for the concepts tool APIs of any
// domain expose: for each common action on data (read, change, delete,
// copy, move, convert, summarise, schedule, notify, pay, book, monitor)
// and each common noun of software, office, commerce, media, home and
// travel, the everyday words and narrower terms a request uses for it. No
// query set was consulted. The rules of conceptGroups hold: a line is one
// concept, and a word that names unrelated concepts (post, pull, drop,
// run, set, get, make) is left out.
var generalGroups = `
# actions on data
erase delete remove discard trash destroy
copy duplicate clone replicate
move relocate transfer migrate
rename retitle
edit modify amend revise alter tweak
replace substitute swap
undo revert rollback
restore recover undelete
retrieve fetch obtain
lookup search find locate seek query
browse explore navigate
filter narrow restrict
sort order rank arrange
group categorize classify bucket
count tally total number
combine merge join unite
separate split divide
compare diff difference contrast
validate verify check confirm
convert transform translate transcode
summarize summarise summary digest recap overview gist tldr synopsis brief
explain describe describes description details
analyze analyse analysis examine evaluate assess
monitor watch observe track
measure metric gauge
notify alert warn inform announce
schedule plan book arrange reserve
postpone reschedule delay defer
cancel abort revoke withdraw
approve accept authorize authorise
reject decline deny refuse
subscribe follow enroll enrol signup
unsubscribe unfollow optout
publish release announce
archive shelve
hide mute silence snooze
pin highlight feature
upload attach
download save export
import ingest load
send forward
print printer printing
scan digitize digitise
sign signature esign
encrypt encipher protect
decrypt decipher unlock
pay payment paying remit settle
charge bill invoice
refund reimburse repay
buy purchase order acquire
sell sale sold
book booking reservation reserve
rent rental lease hire
# software and operations
app application software program
service microservice daemon
server host machine box instance
container docker

namespace tenant
config configuration settings setting preferences options
environment env variable
credential secret password passphrase
key apikey token accesskey
permission access privilege right role grant
account user login profile
repository repo codebase
version release revision
deploy deployment rollout ship
restart reboot bounce relaunch
crash outage down failure fault incident
error exception fault failure
bug defect issue
log logs journal syslog
trace tracing span
health healthcheck liveness readiness probe
uptime availability
latency lag delay slowness responsiveness
throughput bandwidth
load utilization utilisation usage busy
cpu processor core compute
memory ram heap
disk storage volume space capacity
network connectivity
dns domain hostname
certificate cert tls ssl https
backup snapshot
queue backlog
job task work
cron schedule timer periodic recurring
webhook callback hook
api endpoint interface
database db datastore
table dataset
row record entry
column field property attribute
query sql statement
chart graph plot visualization visualisation diagram
dashboard panel board
# office and communication
document doc paper file
spreadsheet workbook sheet
presentation deck slides slideshow
note notes memo jot
minutes transcript
letter correspondence
email mail inbox mailbox
recipient addressee
sender author
subject headline title heading
draft unsent
folder directory
calendar agenda diary
meeting appointment call
attendee participant guest invitee
availability free busy freebusy
reminder alarm nudge
deadline due duedate
task todo chore action
project initiative
team department division squad
colleague coworker teammate peer
manager boss supervisor lead
contact person people
phone telephone mobile cell
text sms
chat conversation discussion
reply respond answer response
mention tag
announcement broadcast bulletin
# people and organisation
employee staff worker personnel
hire recruit onboard onboarding
vacation holiday leave pto timeoff
sick illness unwell
salary pay wage payroll compensation
job title position
review appraisal evaluation feedback
# money and commerce
money cash funds
price cost fee rate
expense spending spend outgoing
income revenue earnings
balance remaining
budget allowance
invoice bill
receipt proof
tax vat gst
currency fx exchange
transfer wire remittance
subscription membership plan
customer client buyer shopper patron
product item goods merchandise sku
inventory stock supply
cart basket
order purchase
shipping delivery shipment dispatch
return rma
discount coupon promo promotion voucher
review rating feedback
# media
photo picture image pic snapshot
video clip footage movie film recording
audio sound music track
resize rescale shrink enlarge
crop trim
rotate flip turn
compress shrink smaller optimize optimise
thumbnail preview
subtitle caption captions
transcribe transcription dictation speech
watermark overlay
playlist queue
channel creator
# home
light lamp bulb lighting
thermostat heating cooling hvac temperature
lock deadbolt bolt latch
camera cam doorbell
plug outlet socket switch
vacuum robot
blind blinds curtain shade
sensor detector
# travel and places
address location place whereabouts
directions route way
distance far
flight plane airline
hotel stay lodging room
car vehicle
traffic congestion
weather forecast
# knowledge
remember memorize memorise recall
forget unlearn
fact knowledge information info
question ask query
definition meaning
language tongue locale
word term vocabulary
spelling typo misspelling
news headlines headline
article story
podcast episode
author writer
survey questionnaire poll
vote ballot
# web and everyday life
website site homepage webpage
link url hyperlink
screenshot screengrab
bookmark favourite favorite
username handle nickname
statistics stats analytics
grocery groceries supermarket
recipe dish meal
workout exercise fitness training
doctor physician clinician
medicine medication prescription
insurance coverage policy
loan borrowing mortgage
investment portfolio
font typeface
colour color hue
`
