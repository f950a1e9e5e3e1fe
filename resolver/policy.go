package resolver

// Channel policy and permission decisions: data in the registry
// file's "channel_policy" section that narrows a resolution per channel
// and decides, per tool, whether a call is allowed, asked or denied.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/internal/toolname"
)

// The decisions of a Decision.
const (
	// DecisionAllow: the call may run.
	DecisionAllow = "allow"
	// DecisionAsk: the call runs only once the user allows it (for the
	// session or once).
	DecisionAsk = "ask"
	// DecisionDeny: the call never runs; the tool is also withheld from the
	// channel's tool set.
	DecisionDeny = "deny"
)

// DefaultPermissionOrder is the permission order a policy uses when it
// sets none: least to most powerful. A tool without a permission label
// ranks below every label; a label not in the order ranks above every
// label, so any max_permission withholds it.
var DefaultPermissionOrder = []string{"read", "network", "interactive", "write", "exec"}

// AnyChannel is the channel key of the policy that applies to channels
// the policy does not name (and to requests without a channel); as a
// decision rule's channel or profile it matches any.
const AnyChannel = "*"

// ChannelRule narrows the tools of one channel.
type ChannelRule struct {
	// Deny lists tool names or patterns the channel never receives.
	Deny []string `json:"deny,omitempty"`
	// MaxPermission, when set, withholds every tool whose permission
	// ranks above it in the policy's order.
	MaxPermission string `json:"max_permission,omitempty"`
}

// DecisionRule decides calls of the tools it matches.
type DecisionRule struct {
	// Channel is a channel name or "*" (any; the default).
	Channel string `json:"channel,omitempty"`
	// Profile is an agent profile name or "*" (any; the default).
	Profile string `json:"profile,omitempty"`
	// Tool is a tool name or pattern.
	Tool string `json:"tool"`
	// Decision is DecisionAllow, DecisionAsk or DecisionDeny.
	Decision string `json:"decision"`
}

// Policy is a registry's channel policy: versioned, part of the registry
// file and so of its canonical bytes.
type Policy struct {
	// Version names the policy; explain and call-check name it.
	Version string `json:"version"`
	// PermissionOrder ranks permission labels, least powerful first.
	PermissionOrder []string `json:"permission_order"`
	// Channels maps a channel name (or "*") to its rule.
	Channels map[string]ChannelRule `json:"channels,omitempty"`
	// Decisions are the allow/ask/deny rules, in file order.
	Decisions []DecisionRule `json:"decisions,omitempty"`

	channelNames []string // sorted
}

// Decision is the decision for one tool in one channel and profile, with
// the rule that made it.
type Decision struct {
	// Decision is DecisionAllow, DecisionAsk or DecisionDeny.
	Decision string `json:"decision"`
	// Rule names the deciding rule, e.g. "default-allow",
	// "channel-deny:public:bash@pol-1", "channel-max-permission:public:read@pol-1",
	// "decision[2]:ask:*:*:bash@pol-1".
	Rule string `json:"rule"`
}

var policyKeys = []string{"version", "permission_order", "channels", "decisions"}
var channelRuleKeys = []string{"deny", "max_permission"}
var decisionKeys = []string{"channel", "profile", "tool", "decision"}

// policy reads the optional "channel_policy" section.
func (l *loader) policy(r *Registry, n *jnode) {
	if n == nil || n.kind == jNull {
		return
	}
	if n.kind != jObject {
		l.addf(`channel_policy: is %s; want {"version":"pol-1","channels":{"public":{"deny":["bash"],"max_permission":"read"}}}`, n.kind)
		return
	}
	l.unknownKeys("channel_policy", n, policyKeys)
	p := &Policy{PermissionOrder: DefaultPermissionOrder, Channels: map[string]ChannelRule{}}
	if v := n.get("version"); v == nil {
		l.addf(`channel_policy.version: missing; set a version such as "pol-1" (explain and call-check name it)`)
	} else if s, ok := l.str("channel_policy.version", v); ok {
		if !validVersion(s) {
			l.addf("channel_policy.version %q: want 1 to 128 characters of A-Z a-z 0-9 . _ : + -; rename it", s)
		}
		p.Version = s
	}
	if v := n.get("permission_order"); v != nil {
		if order, ok := l.strList("channel_policy.permission_order", v); ok {
			if len(order) == 0 {
				l.addf("channel_policy.permission_order: is empty; list the permission labels least powerful first, or leave it out for %s", strings.Join(DefaultPermissionOrder, " < "))
			}
			for i, s := range order {
				if j := slices.Index(order, s); j < i {
					l.addf("channel_policy.permission_order[%d]: %q repeats [%d]; list each label once", i, s, j)
				}
			}
			p.PermissionOrder = order
		}
	}
	if c := n.get("channels"); c != nil && c.kind != jNull {
		if c.kind != jObject {
			l.addf("channel_policy.channels: is %s; want an object of channel name to rule", c.kind)
		} else {
			for i, name := range c.keys {
				path := "channel_policy.channels." + name
				if name == "" {
					l.addf(`channel_policy.channels: an empty channel name; name the channel, or use "*" for every other channel`)
					continue
				}
				if !validChannelKey(name) {
					l.addf(`channel_policy.channels: channel %q is no channel a request can carry (1 to %d of [A-Za-z0-9_-], or "*"); fix the name, or the rule never applies`, name, maxChannelLen)
					continue
				}
				p.Channels[name] = l.channelRule(p, path, c.vals[i])
				p.channelNames = append(p.channelNames, name)
			}
			slices.Sort(p.channelNames)
		}
	}
	if d := n.get("decisions"); d != nil && d.kind != jNull {
		if d.kind != jArray {
			l.addf("channel_policy.decisions: is %s; want an array of {\"tool\":...,\"decision\":\"allow|ask|deny\"}", d.kind)
		} else {
			seen := map[DecisionRule]int{}
			for i, e := range d.elems {
				rule, ok := l.decisionRule(r, fmt.Sprintf("channel_policy.decisions[%d]", i), e)
				if !ok {
					continue
				}
				key := rule
				key.Decision = ""
				if j, dup := seen[key]; dup {
					l.addf("channel_policy.decisions[%d]: same channel, profile and tool as [%d]; keep one of them", i, j)
					continue
				}
				seen[key] = i
				p.Decisions = append(p.Decisions, rule)
			}
		}
	}
	r.policy = p
}

func (l *loader) toolPattern(path, s string) bool {
	if IsPattern(s) {
		if !toolname.ValidPattern(s) {
			l.addf("%s: %q is not %s", path, s, toolname.PatternRule)
			return false
		}
		return true
	}
	if !toolname.Valid(s) {
		l.addf("%s: %q is not a tool name (%s) nor a pattern", path, s, namePatternText)
		return false
	}
	return true
}

func (l *loader) channelRule(p *Policy, path string, n *jnode) ChannelRule {
	var cr ChannelRule
	if n.kind != jObject {
		l.addf(`%s: is %s; want {"deny":["bash"],"max_permission":"read"}`, path, n.kind)
		return cr
	}
	l.unknownKeys(path, n, channelRuleKeys)
	if v := n.get("deny"); v != nil {
		if list, ok := l.strList(path+".deny", v); ok {
			for i, s := range list {
				if l.toolPattern(fmt.Sprintf("%s.deny[%d]", path, i), s) {
					cr.Deny = append(cr.Deny, s)
				}
			}
		}
	}
	if v := n.get("max_permission"); v != nil {
		if s, ok := l.str(path+".max_permission", v); ok {
			if !slices.Contains(p.PermissionOrder, s) {
				l.addf("%s.max_permission %q: not in the permission order; use one of %s", path, s, strings.Join(p.PermissionOrder, ", "))
			} else {
				cr.MaxPermission = s
			}
		}
	}
	return cr
}

func (l *loader) decisionRule(r *Registry, path string, n *jnode) (DecisionRule, bool) {
	var d DecisionRule
	if n.kind != jObject {
		l.addf(`%s: is %s; want {"channel":"*","profile":"*","tool":"bash","decision":"ask"}`, path, n.kind)
		return d, false
	}
	l.unknownKeys(path, n, decisionKeys)
	ok := true
	d.Channel, d.Profile = AnyChannel, AnyChannel
	if v := n.get("channel"); v != nil {
		if s, good := l.str(path+".channel", v); good && s != "" {
			d.Channel = s
			if !validChannelKey(s) {
				l.addf(`%s.channel %q: no channel a request can carry (1 to %d of [A-Za-z0-9_-], or "*"); fix the name, or the rule never applies`, path, s, maxChannelLen)
				ok = false
			}
		}
	}
	if v := n.get("profile"); v != nil {
		if s, good := l.str(path+".profile", v); good && s != "" {
			d.Profile = s
			if _, known := r.profiles[s]; s != AnyChannel && !known {
				l.addf("%s.profile %q: no such profile; use one of %s, or \"*\"", path, s, strings.Join(r.profileNames, ", "))
				ok = false
			}
		}
	}
	if v := n.get("tool"); v == nil {
		l.addf(`%s.tool: missing; name the tool or a pattern such as "mcp__github__*"`, path)
		ok = false
	} else if s, good := l.str(path+".tool", v); !good || !l.toolPattern(path+".tool", s) {
		ok = false
	} else {
		d.Tool = s
	}
	if v := n.get("decision"); v == nil {
		l.addf(`%s.decision: missing; set "allow", "ask" or "deny"`, path)
		ok = false
	} else if s, good := l.str(path+".decision", v); !good {
		ok = false
	} else if s != DecisionAllow && s != DecisionAsk && s != DecisionDeny {
		l.addf(`%s.decision %q: want "allow", "ask" or "deny"`, path, s)
		ok = false
	} else {
		d.Decision = s
	}
	return d, ok
}

// Policy returns the registry's channel policy, or nil when it has none.
// The returned value is shared and must not be modified.
func (r *Registry) Policy() *Policy { return r.policy }

// PolicyVersion returns the channel policy's version, "" without one.
func (r *Registry) PolicyVersion() string {
	if r.policy == nil {
		return ""
	}
	return r.policy.Version
}

// channelRule returns the rule of channel (its own, else "*") and the key
// that matched.
func (p *Policy) channelRule(channel string) (ChannelRule, string, bool) {
	if cr, ok := p.Channels[channel]; ok && channel != "" {
		return cr, channel, true
	}
	cr, ok := p.Channels[AnyChannel]
	return cr, AnyChannel, ok
}

// rank returns a permission label's rank: -1 for none, len(order) for a
// label not in the order.
func (p *Policy) rank(perm string) int {
	if perm == "" {
		return -1
	}
	if i := slices.Index(p.PermissionOrder, perm); i >= 0 {
		return i
	}
	return len(p.PermissionOrder)
}

// specificity orders the tool part of a decision rule: a plain name beats
// any pattern; among patterns, more literal characters win.
func specificity(pattern string) int {
	if !IsPattern(pattern) {
		return 1 << 20
	}
	return len(pattern) - strings.Count(pattern, "*") - strings.Count(pattern, "?")
}

// Decide decides a call of tool in channel under profile. The order:
//
//  1. no policy: allow (rule "default-allow");
//  2. the channel's rule (its own, else "*"): a deny pattern matching the
//     tool denies ("channel-deny:C:PATTERN@V", the first matching pattern
//     in file order); a permission ranked above max_permission denies
//     ("channel-max-permission:C:MAX@V");
//  3. the most specific matching decision rule decides
//     ("decision[i]:D:CHANNEL:PROFILE:TOOL@V"): a plain tool name beats a
//     pattern, a pattern with more literal characters beats one with fewer,
//     then a named channel beats "*", then a named profile beats "*", then
//     the earlier rule in the file;
//  4. else allow ("default-allow").
//
// Decide does not look at the session's intent: a tool the resolution
// leaves out is not callable whatever Decide says.
func (r *Registry) Decide(channel, profile, tool string) Decision {
	p := r.policy
	if p == nil {
		return Decision{Decision: DecisionAllow, Rule: "default-allow"}
	}
	t, known := r.Tool(tool)
	if cr, key, ok := p.channelRule(channel); ok {
		for _, pat := range cr.Deny {
			if matchName(pat, tool) {
				return Decision{Decision: DecisionDeny, Rule: "channel-deny:" + key + ":" + pat + "@" + p.Version}
			}
		}
		if known && cr.MaxPermission != "" && p.rank(t.Permission) > p.rank(cr.MaxPermission) {
			return Decision{Decision: DecisionDeny, Rule: "channel-max-permission:" + key + ":" + cr.MaxPermission + "@" + p.Version}
		}
	}
	best := -1
	var bestKey [3]int
	for i := range p.Decisions {
		d := &p.Decisions[i]
		if d.Channel != AnyChannel && d.Channel != channel || d.Profile != AnyChannel && d.Profile != profile || !matchName(d.Tool, tool) {
			continue
		}
		key := [3]int{specificity(d.Tool), b2i(d.Channel != AnyChannel), b2i(d.Profile != AnyChannel)}
		if best < 0 || slices.Compare(key[:], bestKey[:]) > 0 {
			best, bestKey = i, key
		}
	}
	if best >= 0 {
		d := &p.Decisions[best]
		return Decision{Decision: d.Decision, Rule: fmt.Sprintf("decision[%d]:%s:%s:%s:%s@%s", best, d.Decision, d.Channel, d.Profile, d.Tool, p.Version)}
	}
	return Decision{Decision: DecisionAllow, Rule: "default-allow"}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// applyPolicy drops from out the tools that req's channel and profile
// deny, returning the kept indices and the withheld names in order. It
// returns out unchanged when there is no policy. tool_search is never
// withheld: it only loads tools of the set, which the policy has
// already narrowed.
func (r *Registry) applyPolicy(out []int32, req *Request) ([]int32, []string) {
	if r.policy == nil || len(out) == 0 {
		return out, nil
	}
	var withheld []string
	kept := out[:0:0]
	for _, i := range out {
		name := r.tools[i].Name
		if name != ToolSearch && r.Decide(req.Channel, req.Profile, name).Decision == DecisionDeny {
			withheld = append(withheld, name)
			continue
		}
		kept = append(kept, i)
	}
	if withheld == nil {
		return out, nil
	}
	return kept, withheld
}

// appendJSON appends the canonical "channel_policy" section.
func (p *Policy) appendJSON(b []byte) []byte {
	b = append(b, `,"channel_policy":{"version":`...)
	b = appendJSONString(b, p.Version)
	b = append(b, `,"permission_order":`...)
	b = appendStringList(b, p.PermissionOrder)
	b = append(b, `,"channels":{`...)
	for i, name := range p.channelNames {
		if i > 0 {
			b = append(b, ',')
		}
		cr := p.Channels[name]
		b = appendJSONString(b, name)
		b = append(b, `:{"deny":`...)
		b = appendStringList(b, cr.Deny)
		if cr.MaxPermission != "" {
			b = append(b, `,"max_permission":`...)
			b = appendJSONString(b, cr.MaxPermission)
		}
		b = append(b, '}')
	}
	b = append(b, `},"decisions":[`...)
	for i, d := range p.Decisions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"channel":`...)
		b = appendJSONString(b, d.Channel)
		b = append(b, `,"profile":`...)
		b = appendJSONString(b, d.Profile)
		b = append(b, `,"tool":`...)
		b = appendJSONString(b, d.Tool)
		b = append(b, `,"decision":`...)
		b = appendJSONString(b, d.Decision)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// explainPolicy turns an explanation of a tool the expansion includes into
// the policy's refusal when the channel policy withholds it.
func (r *Registry) explainPolicy(ex *Explanation, req *Request) {
	if r.policy == nil || !ex.Included || ex.Tool == ToolSearch {
		return
	}
	d := r.Decide(req.Channel, req.Profile, ex.Tool)
	if d.Decision != DecisionDeny {
		return
	}
	ex.Detail = fmt.Sprintf("the expansion selects %q (%s), but channel policy %s withholds it from channel %q by rule %s; a channel only narrows (see docs/semantics.md#channel-policy)",
		ex.Tool, ex.Rule, r.policy.Version, req.Channel, d.Rule)
	ex.Included, ex.Rule = false, d.Rule
}

// maxChannelLen is the longest channel name (an API subject token).
const maxChannelLen = 64

// validChannelKey reports whether a policy's channel key can match a
// request: AnyChannel, or 1 to maxChannelLen bytes of [A-Za-z0-9_-] (the
// channel token rule of the API). A key such as "public " would
// otherwise leave the channel it meant unrestricted without a word.
func validChannelKey(name string) bool {
	if name == AnyChannel {
		return true
	}
	if name == "" || len(name) > maxChannelLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !toolname.NameByte(name[i]) {
			return false
		}
	}
	return true
}

// PolicyChannels returns, sorted and without repeats, the channels the
// registry's channel policy names in a channel rule or a decision rule,
// "*" left out; nil without a policy. A request from any other channel
// resolves as the "*" rule says, so these plus one other channel ("")
// cover every way the policy can resolve a session (registry diff).
func (r *Registry) PolicyChannels() []string {
	if r.policy == nil {
		return nil
	}
	out := slices.Clone(r.policy.channelNames)
	for i := range r.policy.Decisions {
		if ch := r.policy.Decisions[i].Channel; ch != AnyChannel {
			out = append(out, ch)
		}
	}
	out = slices.DeleteFunc(out, func(ch string) bool { return ch == AnyChannel })
	slices.Sort(out)
	return slices.Compact(out)
}
