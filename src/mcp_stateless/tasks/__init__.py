"""The Tasks extension (`io.modelcontextprotocol/tasks`): durable tool runs any instance can answer for."""
