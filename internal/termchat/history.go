package termchat

// Conversation is the chat history sent with each turn: an optional system
// prompt and the user and assistant turns so far. The zero value is an
// empty conversation.
type Conversation struct {
	system string
	turns  []Message
}

// System is the system prompt ("" for none).
func (c *Conversation) System() string { return c.system }

// SetSystem sets the system prompt and clears the history: the earlier
// turns were answered under another prompt.
func (c *Conversation) SetSystem(text string) {
	c.system = text
	c.Reset()
}

// Reset clears the history and keeps the system prompt.
func (c *Conversation) Reset() { c.turns = nil }

// Turns is the number of exchanges in the history.
func (c *Conversation) Turns() int { return len(c.turns) / 2 }

// With returns the messages of a request asking user next: the system
// prompt, the history and the new message. The history is not changed.
func (c *Conversation) With(user string) []Message {
	msgs := make([]Message, 0, len(c.turns)+2)
	if c.system != "" {
		msgs = append(msgs, Message{Role: "system", Content: c.system})
	}
	msgs = append(msgs, c.turns...)
	return append(msgs, Message{Role: "user", Content: user})
}

// Add records an exchange.
func (c *Conversation) Add(user, assistant string) {
	c.turns = append(c.turns, Message{Role: "user", Content: user}, Message{Role: "assistant", Content: assistant})
}
