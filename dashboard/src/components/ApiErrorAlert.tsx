// An API error, with the way out: a token problem opens the settings.
import { Alert, Button, Group, Text } from "@mantine/core";

import type { ApiError } from "../api";
import { useOpenSettings } from "./settingsContext";

export function ApiErrorAlert({ error }: { error: ApiError | undefined }) {
  const openSettings = useOpenSettings();
  if (!error) return null;
  if (error.needsToken) {
    return (
      <Alert color="yellow" title="This server needs the admin token" data-testid="auth-needed">
        <Group justify="space-between">
          <Text size="sm">{error.message}</Text>
          <Button size="xs" onClick={openSettings}>
            Enter token
          </Button>
        </Group>
      </Alert>
    );
  }
  const missing = error.status === 404 && error.message.toLowerCase().includes("not found");
  return (
    <Alert color="red" title={error.status ? `Error ${error.status}` : "Server unreachable"} data-testid="api-error">
      <Text size="sm">{error.message}</Text>
      {missing && (
        <Text size="xs" c="dimmed">
          An older server without the dashboard API? Upgrade agentbolt on the server.
        </Text>
      )}
    </Alert>
  );
}
