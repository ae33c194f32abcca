// Server URL and admin token, kept in localStorage (see settings.ts).
import { Button, Group, Modal, PasswordInput, Stack, Text, TextInput } from "@mantine/core";
import { useEffect, useState } from "react";

import { getSettings, saveSettings } from "../settings";

export default function SettingsModal({ opened, onClose }: { opened: boolean; onClose: () => void }) {
  const [serverUrl, setServerUrl] = useState(getSettings().serverUrl);
  const [token, setToken] = useState(getSettings().token);

  useEffect(() => {
    if (opened) {
      setServerUrl(getSettings().serverUrl);
      setToken(getSettings().token);
    }
  }, [opened]);

  const save = () => {
    saveSettings({ serverUrl, token });
    onClose();
  };

  return (
    <Modal opened={opened} onClose={onClose} title="Settings">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          save();
        }}
      >
        <Stack>
          <TextInput
            label="Server URL"
            description="Empty: the server that served this page. Another server must be started with --cors-origin for this page's origin."
            placeholder={window.location.origin}
            value={serverUrl}
            onChange={(e) => setServerUrl(e.currentTarget.value)}
            data-testid="settings-server-url"
          />
          <PasswordInput
            label="Admin token"
            description="The server's --admin-token. Kept in this browser only (localStorage)."
            value={token}
            onChange={(e) => setToken(e.currentTarget.value)}
            data-testid="settings-token"
          />
          <Text size="xs" c="dimmed">
            Anyone with access to this browser profile can read the token.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" data-testid="settings-save">
              Save
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
